"""Headless Chromium (Debian's `chromium`, which `make test` installs) driven through the Chrome
DevTools Protocol (websocket-client), for the tests that look at a report as a user sees it
(tests/test_report_browser.py, tests/test_report_charts.py):

    browser        module fixture: one headless Chromium on a blank page, a DevTools connection
                   to it (import it into the test module).
    load(browser, path)
                   opens the file with the Page, Runtime, Log and Network domains enabled first,
                   waits for its load event, and returns the connection holding every event the
                   page caused (`events_named`).
    evaluate(page, expression)
                   the value of a JavaScript expression in the page; an exception fails the test.
    console_problems(page), requests_besides(page, path)
                   what the page printed on its console (errors, warnings, uncaught exceptions)
                   and the requests it made beyond its own file.
    template_section_headings(), section_headings(page)
                   the <h2> headings of report/templates/report.html.j2, in order, and those the
                   page shows (a heading with no height on the screen is left out).
    template_chart_slots(), chart_slots(page), chart_problems(page)
                   the chart slots of the template (data-chart="NAME" on a chart's place or on
                   the sentence written instead when it has nothing to draw); what the page
                   shows in each ({name: {"chart", "sentence"}}); and one line per slot of the
                   page that draws nothing visible and says nothing, per chart with no visible
                   mark, per chart text cut off by its chart's edge and per two texts of a chart
                   that overlap or, on one line, touch.
    measured_site_grid(base, env)
                   an I/O-model grid measured by `ioassess iomodels` (2 ranks, 1 MiB a model).
"""
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

import pytest
import websocket

TEMPLATE = pathlib.Path(__file__).resolve().parents[1] / "report" / "templates" / "report.html.j2"
WAIT_S = 20


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


def load(browser, path):
    """The file loaded in the browser: the DevTools connection, with every event seen since the
    domains were enabled (before navigating, so that nothing the page does is missed)."""
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.send(f"{domain}.enable")
    browser.events.clear()
    navigation = browser.send("Page.navigate", url=path.as_uri())
    assert "errorText" not in navigation, navigation
    browser.wait_for_event("Page.loadEventFired")
    return browser


def evaluate(page, expression):
    result = page.send("Runtime.evaluate", expression=expression, returnByValue=True)
    assert "exceptionDetails" not in result, result["exceptionDetails"]
    return result["result"]["value"]


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


def requests_besides(page, path):
    """The URLs the page requested besides its own file (data: URLs are no requests); the file
    itself must be among them."""
    urls = [params["request"]["url"] for params in page.events_named("Network.requestWillBeSent")]
    assert path.as_uri() in urls, urls
    return [url for url in urls if url != path.as_uri() and not url.startswith("data:")]


def template_section_headings():
    headings = re.findall(r"<h2\b[^>]*>(.*?)</h2>", TEMPLATE.read_text(), flags=re.S)
    assert headings and not any("{" in h or "<" in h for h in headings), headings
    return headings


def section_headings(page):
    return evaluate(page, "Array.from(document.querySelectorAll('h2'))"
                          ".filter(h => h.getBoundingClientRect().height > 0).map(h => h.textContent.trim())")


def template_chart_slots():
    """The names of the chart slots of the template (data-chart="NAME"), in order."""
    return list(dict.fromkeys(re.findall(r'data-chart="(\w+)"', TEMPLATE.read_text())))


# In the page: per chart slot (data-chart), what it shows. A mark (class "mark": a bar, a line, a
# point, a cell) is visible when it is displayed, not transparent, has an area (filled) or a length
# (stroked) on the screen and lies at least in part inside its chart's frame (class "frame").
CHARTS_IN_PAGE = r"""
(() => {
  const shown = el => {
    for (let e = el; e; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.display === 'none' || s.visibility !== 'visible' || Number(s.opacity) === 0) return false;
    }
    return true;
  };
  const visibleMark = (mark, frame) => {
    const s = getComputedStyle(mark), box = mark.getBoundingClientRect();
    const filled = s.fill !== 'none' && Number(s.fillOpacity) > 0 && box.width > 0 && box.height > 0;
    const stroked = s.stroke !== 'none' && parseFloat(s.strokeWidth) > 0 && Number(s.strokeOpacity) > 0 &&
      (box.width > 0 || box.height > 0);
    const inside = box.right >= frame.left && box.left <= frame.right && box.bottom >= frame.top &&
      box.top <= frame.bottom;
    return shown(mark) && (filled || stroked) && inside;
  };
  const rect = b => ({left: b.left, top: b.top, right: b.right, bottom: b.bottom});
  return Array.from(document.querySelectorAll('[data-chart]')).map(slot => ({
    name: slot.dataset.chart,
    sentence: slot.tagName === 'svg' || slot.querySelector('svg') ? null : (shown(slot) ? slot.innerText.trim() : ''),
    charts: Array.from(slot.tagName === 'svg' ? [slot] : slot.querySelectorAll('svg')).map(svg => {
      const frame = svg.querySelector('.frame');
      const frameBox = frame ? frame.getBoundingClientRect() : svg.getBoundingClientRect();
      return {
        title: svg.querySelector('title') ? svg.querySelector('title').textContent : '',
        box: rect(svg.getBoundingClientRect()),
        marks: Array.from(svg.querySelectorAll('.mark')).filter(m => visibleMark(m, frameBox)).length,
        texts: Array.from(svg.querySelectorAll('text')).map(t => ({text: t.textContent,
                                                                   box: rect(t.getBoundingClientRect())})),
      };
    }),
  }));
})()
"""
# Two texts of a chart on one line (their boxes overlapping by half a line's height or more) need
# this much space between them (px: about a space at the charts' 11 px font) not to read as one.
TEXT_GAP_PX = 3


def _texts_collide(a, b):
    """Whether two text boxes overlap, or stand on one line with less than TEXT_GAP_PX between."""
    width = min(a["right"], b["right"]) - max(a["left"], b["left"])   # negative: the gap between
    height = min(a["bottom"], b["bottom"]) - max(a["top"], b["top"])
    one_line = height >= min(a["bottom"] - a["top"], b["bottom"] - b["top"]) / 2
    return (width > 0.5 and height > 0.5) or (one_line and width > -TEXT_GAP_PX)


def chart_slots(page):
    """{slot name: what the page shows there, "chart" and/or "sentence"}."""
    shown = {}
    for slot in evaluate(page, CHARTS_IN_PAGE):
        shown.setdefault(slot["name"], set()).add("chart" if slot["charts"] else "sentence")
    return shown


def chart_problems(page):
    """One line per chart slot that shows neither a chart with a visible mark nor a sentence, per
    chart without a visible mark, per chart text cut off by the chart's edge and per two texts
    of a chart that overlap or, on one line, touch."""
    problems = []
    for slot in evaluate(page, CHARTS_IN_PAGE):
        if not slot["charts"] and not slot["sentence"]:
            problems.append(f"{slot['name']}: no chart and no sentence")
        for chart in slot["charts"]:
            where = f"{slot['name']}: {chart['title']!r}"
            if not chart["marks"]:
                problems.append(f"{where}: no visible mark")
            for text in chart["texts"]:
                sticks_out = [side for side, outside in (
                    ("left", chart["box"]["left"] - text["box"]["left"]),
                    ("top", chart["box"]["top"] - text["box"]["top"]),
                    ("right", text["box"]["right"] - chart["box"]["right"]),
                    ("bottom", text["box"]["bottom"] - chart["box"]["bottom"])) if outside > 0.5]
                if sticks_out:
                    problems.append(f"{where}: {text['text']!r} is cut off at the {', '.join(sticks_out)}")
            texts = chart["texts"]
            problems += [f"{where}: {a['text']!r} and {b['text']!r} run into each other"
                         for i, a in enumerate(texts) for b in texts[i + 1:] if _texts_collide(a["box"], b["box"])]
    return problems


def measured_site_grid(base, env):
    """The grid `ioassess iomodels` measures in base/sweep (2 ranks, 3 models, 1 MiB each),
    written to base/grid.json; its path."""
    (base / "sweep").mkdir()
    made = subprocess.run([sys.executable, "-m", "ioassess", "iomodels", "--dir", str(base / "sweep"),
                           "--total-bytes", "1M", "--processes", "2", "--repeats", "1", "-o", str(base / "grid.json")],
                          cwd="/", env=env, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    return base / "grid.json"
