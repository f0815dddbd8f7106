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
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import zlib

import pytest
import websocket
from conftest import JOB_ID_VARIABLES
from recorder_helpers import is_ioassess_setting

pytestmark = pytest.mark.browser

TEMPLATE = pathlib.Path(__file__).resolve().parents[1] / "report" / "templates" / "report.html.j2"
SCRIPT_NAME = "<script>alert(1)</script>.dat"
QUOTES_NAME = "q\"uote'amp&é名.dat"
HOSTILE_HOST = "<img src=x onerror=alert(2)>node&1"
WAIT_S = 20

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


def template_section_headings():
    headings = re.findall(r"<h2\b[^>]*>(.*?)</h2>", TEMPLATE.read_text(), flags=re.S)
    assert headings and not any("{" in h or "<" in h for h in headings), headings
    return headings


def hostile_site_grid(base, env):
    """A grid measured by `ioassess iomodels` (2 ranks, 3 models), its host name made hostile."""
    (base / "sweep").mkdir()
    made = subprocess.run([sys.executable, "-m", "ioassess", "iomodels", "--dir", str(base / "sweep"),
                           "--total-bytes", "1M", "--processes", "2", "--repeats", "1", "-o", str(base / "grid.json")],
                          cwd="/", env=env, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    grid = json.loads((base / "grid.json").read_text())
    grid["provenance"]["host"] = HOSTILE_HOST
    (base / "grid.json").write_text(json.dumps(grid))
    return base / "grid.json"


@pytest.fixture(scope="module")
def report(recorder_lib, tmp_path_factory):
    """report.html written by `ioassess run` for a shell workload on files with hostile names,
    placed on a site grid ($IOASSESS_SITE_GRID)."""
    base = tmp_path_factory.mktemp("browser")
    files = [base / "work" / SCRIPT_NAME, base / "work" / QUOTES_NAME, base / "work" / "plain.dat"]
    env = {k: v for k, v in os.environ.items()
           if k not in JOB_ID_VARIABLES and k != "LD_PRELOAD" and not is_ioassess_setting(k)}
    env["IOASSESS_SITE_GRID"] = str(hostile_site_grid(base, env))
    result = subprocess.run([sys.executable, "-m", "ioassess", "run", "--trace-dir", str(base / "traces"), "--",
                             "sh", "-c", WORKLOAD, "workload", *map(str, files)],
                            cwd="/", env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    path = base / "traces" / "report.html"
    assert path.is_file(), result.stderr
    return path


class DevTools:
    """A minimal CDP client on one page target: commands wait for their reply, and every event
    that arrives meanwhile is kept in `events`."""

    def __init__(self, ws_url):
        self.ws = websocket.create_connection(ws_url, timeout=WAIT_S, suppress_origin=True)
        self.events = []
        self.next_id = 0

    def close(self):
        self.ws.close()

    def send(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        reply = self._read_until(lambda message: message.get("id") == self.next_id, f"reply to {method}")
        if "error" in reply:
            raise AssertionError(f"{method} failed: {reply['error']}")
        return reply["result"]

    def wait_for_event(self, method):
        for event in self.events:
            if event["method"] == method:
                return event
        return self._read_until(lambda message: message.get("method") == method, method)

    def events_named(self, *methods):
        return [event["params"] for event in self.events if event["method"] in methods]

    def _read_until(self, wanted, what):
        deadline = time.monotonic() + WAIT_S
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {what} from Chromium within {WAIT_S} s")
            self.ws.settimeout(remaining)
            message = json.loads(self.ws.recv())
            if "method" in message:
                self.events.append(message)
                if message["method"] == "Page.javascriptDialogOpening":
                    # An open dialog blocks the page; dismiss it so that the test fails rather than hangs.
                    self.ws.send(json.dumps({"id": 0, "method": "Page.handleJavaScriptDialog",
                                             "params": {"accept": False}}))
            if wanted(message):
                return message


def wait_for_devtools_port(user_data_dir, process, stderr_path):
    active_port = user_data_dir / "DevToolsActivePort"
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"chromium exited with status {process.returncode}:\n{stderr_path.read_text()}")
        if active_port.is_file():
            lines = active_port.read_text().splitlines()
            if lines and lines[0].isdigit():
                return int(lines[0])
        time.sleep(0.05)
    raise AssertionError(f"chromium wrote no {active_port} within {WAIT_S} s:\n{stderr_path.read_text()}")


def page_websocket_url(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=WAIT_S) as response:
        targets = json.load(response)
    pages = [t for t in targets if t.get("type") == "page"]
    assert pages, targets
    return pages[0]["webSocketDebuggerUrl"]


def stop_chromium(process):
    # SIGTERM to the main process only, so that it reaps its own helpers (killed along with it,
    # they would be left as zombies of init); then SIGKILL whatever of its group is still there.
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=5)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One headless Chromium for the module, on a blank page, with a DevTools connection to it."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium is missing: `make test` installs Debian's chromium (make deps)")
    base = tmp_path_factory.mktemp("chromium")
    user_data_dir = base / "profile"
    with open(base / "stderr", "wb") as stderr:
        process = subprocess.Popen([chromium, "--headless=new", "--no-sandbox", "--remote-debugging-port=0",
                                    f"--user-data-dir={user_data_dir}", "--no-first-run",
                                    "--window-size=1280,1000", "about:blank"],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                   start_new_session=True)
    devtools = None
    try:
        port = wait_for_devtools_port(user_data_dir, process, base / "stderr")
        devtools = DevTools(page_websocket_url(port))
        yield devtools
    finally:
        if devtools is not None:
            devtools.close()
        stop_chromium(process)


@pytest.fixture(scope="module")
def page(browser, report):
    """The report loaded in the browser: the DevTools connection, with every event seen since the
    domains were enabled (before navigating, so that nothing the page does is missed)."""
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.send(f"{domain}.enable")
    browser.events.clear()
    navigation = browser.send("Page.navigate", url=report.as_uri())
    assert "errorText" not in navigation, navigation
    browser.wait_for_event("Page.loadEventFired")
    return browser


def evaluate(page, expression):
    result = page.send("Runtime.evaluate", expression=expression, returnByValue=True)
    assert "exceptionDetails" not in result, result["exceptionDetails"]
    return result["result"]["value"]


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

def console_problems(page):
    """Error and warning messages of the console and uncaught exceptions, one line each."""
    problems = [f"console.{params['type']}: " + " ".join(str(arg.get("value", arg.get("description")))
                                                        for arg in params["args"])
                for params in page.events_named("Runtime.consoleAPICalled")
                if params["type"] in ("error", "warning", "assert")]
    problems += [f"{entry['level']} ({entry['source']}): {entry['text']} {entry.get('url', '')}"
                 for entry in (params["entry"] for params in page.events_named("Log.entryAdded"))
                 if entry["level"] in ("error", "warning")]
    problems += [f"exception: {details['text']} {details.get('exception', {}).get('description', '')}"
                 for details in (params["exceptionDetails"] for params in page.events_named("Runtime.exceptionThrown"))]
    return problems


def test_no_console_message_and_no_exception(page):
    assert console_problems(page) == []


def test_no_request_but_the_report_itself(page, report):
    urls = [params["request"]["url"] for params in page.events_named("Network.requestWillBeSent")]
    assert report.as_uri() in urls
    assert [url for url in urls if url != report.as_uri() and not url.startswith("data:")] == []


def test_screenshot_is_not_blank(page):
    png = base64.b64decode(page.send("Page.captureScreenshot", format="png")["data"])
    pixels = png_pixels(png)
    not_white = sum(1 for pixel in pixels if pixel != (255, 255, 255))
    assert not_white > 0.02 * len(pixels)
    # Text, table borders and the plots' class colours: far more than a few flat colours.
    assert len(set(pixels)) > 50


def test_every_section_heading_of_the_template_is_rendered(page):
    rendered = evaluate(page, "Array.from(document.querySelectorAll('h2')).map(h => h.textContent.trim())")
    assert rendered == template_section_headings()
    visible = evaluate(page, "Array.from(document.querySelectorAll('h2'))"
                             ".every(h => h.getBoundingClientRect().height > 0)")
    assert visible


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
