"""The HTML report as a user sees it: a real workload under `ioassess run`, its report.html opened
in headless Chromium (Debian's `chromium`, which `make test` installs) and inspected through the
Chrome DevTools Protocol. The page must load with no console message, no JavaScript exception and
no request but its own file, draw something, show every section heading of the template, and show
hostile file names as text. The job is placed on a site grid measured by `ioassess iomodels`, whose
host name is made hostile too.
"""
import base64
import io
import json
import subprocess
import sys
import zlib

import pytest
from browser_helpers import (browser, chart_problems, console_problems, evaluate, load,  # noqa: F401
                             measured_site_grid, requests_besides, section_headings, template_section_headings)
from conftest import _installed_cli

pytestmark = pytest.mark.browser

SCRIPT_NAME = "<script>alert(1)</script>.dat"
QUOTES_NAME = "q\"uote'amp&é名.dat"
HOSTILE_HOST = "<img src=x onerror=alert(2)>node&1"

# Writes each file with dd, then reads it with cat and with dd in 4 KiB blocks. The '/' in
# SCRIPT_NAME makes "<script>alert(1)<" a directory; the full path still holds the name.
WORKLOAD = """
set -e
for f in "$@"; do
  mkdir -p "$(dirname "$f")"
  dd if=/dev/zero of="$f" bs=64k count=8 2>/dev/null
  cat "$f" >/dev/null
  dd if="$f" of=/dev/null bs=4k 2>/dev/null
done
"""


def hostile_site_grid(base, env):
    """A grid measured by `ioassess iomodels` (2 ranks, 3 models), its host name made hostile."""
    path = measured_site_grid(base, env)
    grid = json.loads(path.read_text())
    grid["provenance"]["host"] = HOSTILE_HOST
    path.write_text(json.dumps(grid))
    return path


@pytest.fixture(scope="module")
def report(recorder_lib, tmp_path_factory):
    """report.html written by `ioassess run` for a shell workload on files with hostile names,
    placed on a site grid ($IOASSESS_SITE_GRID)."""
    base = tmp_path_factory.mktemp("browser")
    files = [base / "work" / SCRIPT_NAME, base / "work" / QUOTES_NAME, base / "work" / "plain.dat"]
    _, env = _installed_cli([], None)
    env["IOASSESS_SITE_GRID"] = str(hostile_site_grid(base, env))
    result = subprocess.run([sys.executable, "-m", "ioassess", "run", "--trace-dir", str(base / "traces"), "--",
                             "sh", "-c", WORKLOAD, "workload", *map(str, files)],
                            cwd="/", env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    path = base / "traces" / "report.html"
    assert path.is_file(), result.stderr
    return path


@pytest.fixture(scope="module")
def page(browser, report):  # noqa: F811
    """The report loaded in the browser (browser_helpers.load)."""
    return load(browser, report)


def png_pixels(png):
    """The pixels of a PNG as a list of tuples, through Pillow when installed."""
    try:
        from PIL import Image
    except ImportError:
        return png_pixels_by_hand(png)
    with Image.open(io.BytesIO(png)) as image:
        rgb = image.convert("RGB").tobytes()
    return [tuple(rgb[i:i + 3]) for i in range(0, len(rgb), 3)]


def png_pixels_by_hand(png):
    """Decodes the 8-bit, non-interlaced RGB or RGBA PNGs that Chromium writes."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    position, header, data = 8, None, b""
    while position < len(png):
        length = int.from_bytes(png[position:position + 4], "big")
        kind, body = png[position + 4:position + 8], png[position + 8:position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            data += body
    width, height = int.from_bytes(header[0:4], "big"), int.from_bytes(header[4:8], "big")
    bit_depth, colour_type, interlace = header[8], header[9], header[12]
    assert bit_depth == 8 and colour_type in (2, 6) and interlace == 0, header
    channels = 3 if colour_type == 2 else 4
    stride = width * channels
    raw = zlib.decompress(data)
    previous, pixels = bytearray(stride), []
    for row in range(height):
        start = row * (stride + 1)
        line = unfilter_png_line(raw[start], bytearray(raw[start + 1:start + 1 + stride]), previous, channels)
        pixels.extend(tuple(line[i:i + 3]) for i in range(0, stride, channels))
        previous = line
    return pixels


def unfilter_png_line(filter_type, line, previous, channels):
    for i in range(len(line)):
        left = line[i - channels] if i >= channels else 0
        up = previous[i]
        up_left = previous[i - channels] if i >= channels else 0
        if filter_type == 1:
            line[i] = (line[i] + left) & 0xFF
        elif filter_type == 2:
            line[i] = (line[i] + up) & 0xFF
        elif filter_type == 3:
            line[i] = (line[i] + (left + up) // 2) & 0xFF
        elif filter_type == 4:
            estimate = left + up - up_left
            distances = abs(estimate - left), abs(estimate - up), abs(estimate - up_left)
            predictor = (left, up, up_left)[distances.index(min(distances))]
            line[i] = (line[i] + predictor) & 0xFF
    return line


# --- the checks ---------------------------------------------------------------------------------

def test_no_console_message_and_no_exception(page):
    assert console_problems(page) == []


def test_no_request_but_the_report_itself(page, report):
    assert requests_besides(page, report) == []


def test_screenshot_is_not_blank(page):
    png = base64.b64decode(page.send("Page.captureScreenshot", format="png")["data"])
    pixels = png_pixels(png)
    not_white = sum(1 for pixel in pixels if pixel != (255, 255, 255))
    assert not_white > 0.02 * len(pixels)
    # Text, table borders and the plots' class colours: far more than a few flat colours.
    assert len(set(pixels)) > 50


def test_every_section_heading_of_the_template_is_rendered(page):
    assert section_headings(page) == template_section_headings()


def test_every_chart_draws_a_visible_mark_and_its_texts_are_readable(page):
    assert chart_problems(page) == []


def test_hostile_file_names_render_as_text(page, report):
    text = evaluate(page, "document.body.innerText")
    assert SCRIPT_NAME in text and QUOTES_NAME in text
    # The command line names the files too: check the files table's cells themselves.
    cells = evaluate(page, "Array.from(document.querySelectorAll('td.name')).map(td => td.textContent)")
    work = report.parents[1] / "work"
    assert str(work / SCRIPT_NAME) in cells and str(work / QUOTES_NAME) in cells
    assert evaluate(page, "document.querySelectorAll('script').length") == 0
    assert page.events_named("Page.javascriptDialogOpening") == []


def test_raw_html_escapes_the_script_name(report):
    html = report.read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;.dat" in html
    assert "<script" not in html.lower()
    assert "measured on &lt;img src=x onerror=alert(2)&gt;node&amp;1," in html and "<img" not in html


def test_the_site_grid_is_drawn_and_its_hostile_host_is_text(page):
    text = evaluate(page, "document.getElementById('site-grid').textContent")
    assert text.startswith("Your model (") and "the best model in the sweep (" in text
    assert HOSTILE_HOST in evaluate(page, "document.body.innerText")
    assert evaluate(page, "document.querySelectorAll('img').length") == 0
    # the grid: a drawn cell with a tooltip per (P, k) of the 2-rank sweep: (1, 1), (2, 1), (2, 2)
    tooltips = evaluate(page, "Array.from(document.querySelectorAll('svg rect > title')).map(t => t.textContent)")
    assert sorted(t.split(":")[0] for t in tooltips) == ["file per process, P = 2, k = 1", "serial, P = 1, k = 1",
                                                         "shared file, P = 2, k = 2"]
    sizes = evaluate(page, "Array.from(document.querySelectorAll('svg rect > title'))"
                           ".map(t => t.parentElement.getBoundingClientRect().width)")
    assert all(size > 10 for size in sizes)
