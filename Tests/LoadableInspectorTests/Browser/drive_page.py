#!/usr/bin/env python3
"""Drives the inspector page in a real headless Chromium, for InspectorPageBrowserTests.

Speaks the Chrome DevTools Protocol over --remote-debugging-pipe (the browser reads commands on
its fd 3 and writes answers and events on its fd 4, each message JSON ending in a NUL byte), so it
needs nothing beyond the Python standard library. It:

1. loads the page of a running `loadable-demo --inspect` and waits until the timeline shows the
   tour's events (kinds and labels given with --expect-kind and --expect-label);
2. checks that the kind filter hides every other kind and the label filter every other label;
3. clicks the "sync" button of --sync-label and waits until a new syncStarted event of that label
   arrives through the event stream (the action reached the loadable);
4. saves a screenshot, and prints one JSON object with what it saw ("ok": true when all passed).

Everything has one deadline (--deadline seconds of real time); the browser is killed at the end
whatever happens. Exit status 0 when the checks passed, 1 when one failed, 2 when the browser
could not be driven.
"""

import argparse
import base64
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time


class DriverError(Exception):
    """The browser could not be driven (it did not start, answered an error, or time ran out)."""


class Browser:
    """A headless Chromium and its DevTools pipe."""

    def __init__(self, chromium, deadline, width, height):
        self.deadline = deadline
        self.next_id = 0
        self.buffer = b""
        self.events = []
        self.exceptions = []
        self.profile = tempfile.mkdtemp(prefix="loadable-inspector-chromium-")
        # Our ends and the browser's: it reads commands on fd 3 and writes on fd 4.
        commands_read, self.commands_write = os.pipe()
        self.answers_read, answers_write = os.pipe()
        high_read = os.dup(commands_read)
        high_write = os.dup(answers_write)
        while high_read in (3, 4) or high_write in (3, 4):
            high_read, high_write = os.dup(high_read), os.dup(high_write)

        def place_pipes():
            os.dup2(high_read, 3)
            os.dup2(high_write, 4)

        arguments = [
            chromium,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--mute-audio",
            "--remote-debugging-pipe",
            "--user-data-dir=" + self.profile,
            "--window-size=%d,%d" % (width, height),
            "about:blank",
        ]
        self.process = subprocess.Popen(
            arguments,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Not close_fds: it would close 3 and 4 after place_pipes. Every other descriptor of
            # this process is close-on-exec (Python makes them so), and dup2 makes 3 and 4 inheritable.
            close_fds=False,
            preexec_fn=place_pipes,
        )
        for descriptor in (commands_read, answers_write, high_read, high_write):
            os.close(descriptor)
        self.session = None

    def close(self):
        try:
            if self.process.poll() is None:
                try:
                    self.send("Browser.close", session=False, timeout=5)
                except DriverError:
                    pass
                try:
                    self.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=5)
        finally:
            for descriptor in (self.commands_write, self.answers_read):
                try:
                    os.close(descriptor)
                except OSError:
                    pass
            shutil.rmtree(self.profile, ignore_errors=True)

    def left(self):
        return self.deadline - time.monotonic()

    def send(self, method, params=None, session=True, timeout=None):
        """Sends a command and returns its result; raises DriverError on an error or no answer."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        data = json.dumps(message).encode() + b"\0"
        while data:
            written = os.write(self.commands_write, data)
            data = data[written:]
        end = time.monotonic() + (timeout if timeout is not None else max(0.0, self.left()))
        end = min(end, self.deadline)
        while True:
            for answer in self.read_messages(end):
                if answer.get("id") == self.next_id:
                    if "error" in answer:
                        raise DriverError("%s failed: %s" % (method, answer["error"]))
                    return answer.get("result", {})
            if time.monotonic() >= end:
                raise DriverError("no answer to %s in time" % method)

    def read_messages(self, end):
        """Reads what the browser sent until `end`; keeps events, returns the messages read."""
        wait = max(0.0, end - time.monotonic())
        ready, _, _ = select.select([self.answers_read], [], [], min(wait, 0.25))
        if not ready:
            if self.process.poll() is not None:
                raise DriverError("the browser exited with %s" % self.process.returncode)
            return []
        chunk = os.read(self.answers_read, 1 << 20)
        if not chunk:
            raise DriverError("the browser closed its DevTools pipe")
        self.buffer += chunk
        messages = []
        while b"\0" in self.buffer:
            raw, self.buffer = self.buffer.split(b"\0", 1)
            message = json.loads(raw.decode())
            if "method" in message:
                if message["method"] == "Runtime.exceptionThrown":
                    details = message["params"]["exceptionDetails"]
                    self.exceptions.append(details.get("exception", {}).get("description") or details.get("text"))
                self.events.append(message)
            messages.append(message)
        return messages

    def evaluate(self, expression):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        if "exceptionDetails" in result:
            raise DriverError("the page threw on %r: %s" % (expression, result["exceptionDetails"]))
        return result["result"].get("value")

    def wait_until(self, expression, what, poll=0.2, limit=None):
        """Evaluates `expression` until it is truthy; returns its value. Bounded by the deadline,
        and by `limit` seconds when given."""
        end = self.deadline if limit is None else min(self.deadline, time.monotonic() + limit)
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() >= end:
                raise DriverError("timed out waiting for " + what)
            pause_end = min(end, time.monotonic() + poll)
            while time.monotonic() < pause_end:
                self.read_messages(pause_end)


# The page's state as the checks read it.
ROWS = "[...document.querySelectorAll('#timeline-body tr.event')]"


def main():
    # A SIGTERM from the test (its time ran out) still closes the browser, in `finally`.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(3))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chromium", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--screenshot", required=True)
    parser.add_argument("--sync-label", required=True)
    parser.add_argument("--expect-kind", action="append", default=[])
    parser.add_argument("--expect-label", action="append", default=[])
    parser.add_argument("--filter-kind", default="watchdog")
    parser.add_argument("--deadline", type=float, default=45.0)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=900)
    options = parser.parse_args()

    result = {"ok": False, "checks": {}, "errors": []}
    browser = None
    status = 2
    try:
        browser = Browser(options.chromium, time.monotonic() + options.deadline, options.width, options.height)
        target = browser.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = browser.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}, session=False
        )
        browser.session = attached["sessionId"]
        browser.send("Page.enable")
        browser.send("Runtime.enable")
        browser.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": options.width, "height": options.height, "deviceScaleFactor": 1, "mobile": False},
        )
        browser.send("Page.navigate", {"url": options.url})

        # 1. The tour's events are on the page, each with its kind and label.
        sync_button = (
            "[...document.querySelectorAll('button.action[data-action=\"sync\"]')]"
            ".find((button) => button.dataset.label === %s)" % json.dumps(options.sync_label)
        )
        expectations = json.dumps({"kinds": options.expect_kind, "labels": options.expect_label})
        seen = browser.wait_until(
            """(() => {
                const want = %s;
                const rows = %s;
                const kinds = new Set(rows.map((row) => row.dataset.kind));
                const labels = new Set(rows.map((row) => row.dataset.label));
                const connection = document.getElementById('connection');
                const live = connection !== null && connection.dataset.state === 'open';
                const button = %s;
                if (!live || !button || !want.kinds.every((k) => kinds.has(k))
                    || !want.labels.every((l) => labels.has(l))) return null;
                return {rows: rows.length, kinds: [...kinds].sort(), labels: [...labels].sort()};
            })()"""
            % (expectations, ROWS, sync_button),
            "the tour's events and the sync button of " + options.sync_label,
        )
        result["checks"]["timeline"] = seen
        result["eventRows"] = seen["rows"]
        result["kinds"] = seen["kinds"]
        result["labels"] = seen["labels"]

        # 2. The filters hide what does not match.
        kind_filter = browser.evaluate(
            """(() => {
                const select = document.getElementById('kind-filter');
                select.value = %s;
                select.dispatchEvent(new Event('change'));
                const rows = %s;
                const shown = rows.filter((row) => !row.hidden);
                const result = {
                    shown: shown.length,
                    hidden: rows.length - shown.length,
                    shownKinds: [...new Set(shown.map((row) => row.dataset.kind))],
                };
                select.value = '';
                select.dispatchEvent(new Event('change'));
                return result;
            })()"""
            % (json.dumps(options.filter_kind), ROWS)
        )
        result["checks"]["kindFilter"] = kind_filter
        result["kindFilterHidesOthers"] = (
            kind_filter["shown"] > 0 and kind_filter["hidden"] > 0 and kind_filter["shownKinds"] == [options.filter_kind]
        )
        label_filter = browser.evaluate(
            """(() => {
                const input = document.getElementById('label-filter');
                input.value = %s;
                input.dispatchEvent(new Event('input'));
                const rows = %s;
                const shown = rows.filter((row) => !row.hidden);
                const result = {
                    shown: shown.length,
                    hidden: rows.length - shown.length,
                    shownLabels: [...new Set(shown.map((row) => row.dataset.label))],
                };
                input.value = '';
                input.dispatchEvent(new Event('input'));
                return result;
            })()"""
            % (json.dumps(options.sync_label), ROWS)
        )
        result["checks"]["labelFilter"] = label_filter
        result["labelFilterHidesOthers"] = (
            label_filter["shown"] > 0 and label_filter["hidden"] > 0
            and label_filter["shownLabels"] == [options.sync_label]
        )

        # 3. The page's sync button reaches the loadable: a new syncStarted of it arrives live.
        count_started = "%s.filter((row) => row.dataset.kind === 'syncStarted' && row.dataset.label === %s).length" % (
            ROWS,
            json.dumps(options.sync_label),
        )
        ended = "%s.filter((row) => row.dataset.kind === 'syncEnded' && row.dataset.label === %s).length" % (
            ROWS,
            json.dumps(options.sync_label),
        )
        before = browser.evaluate(count_started)
        ended_before = browser.evaluate(ended)
        browser.evaluate("%s.click()" % sync_button)
        after = browser.wait_until(
            "(() => { const n = %s; return n > %d ? n : null; })()" % (count_started, before),
            "a new syncStarted event of " + options.sync_label,
        )
        result["syncStartedBefore"] = before
        result["syncStartedAfter"] = after
        # The sync ends too (simulated time follows real time after the tour), so the screenshot
        # shows it done; not a check: the demo's clock decides when.
        try:
            result["syncEndedAfter"] = browser.wait_until(
                "(() => { const n = %s; return n > %d ? n : null; })()" % (ended, ended_before),
                "its syncEnded event",
                limit=min(5.0, max(0.0, browser.left() - 5.0)),
            )
        except DriverError:
            result["syncEndedAfter"] = None
        result["toast"] = browser.evaluate("document.getElementById('toast').textContent")

        # 4. A screenshot for the documentation, with the timeline scrolled to its newest events.
        browser.evaluate(
            "(() => { const s = document.getElementById('timeline-scroll'); s.scrollTop = s.scrollHeight; })()"
        )
        shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False})
        os.makedirs(os.path.dirname(os.path.abspath(options.screenshot)), exist_ok=True)
        with open(options.screenshot, "wb") as file:
            file.write(base64.b64decode(shot["data"]))
        result["screenshot"] = os.path.abspath(options.screenshot)
        result["pageExceptions"] = list(browser.exceptions)
        result["ok"] = (
            result["kindFilterHidesOthers"]
            and result["labelFilterHidesOthers"]
            and after > before
            and not browser.exceptions
        )
        status = 0 if result["ok"] else 1
    except DriverError as error:
        result["errors"].append(str(error))
        if browser is not None:
            result["pageExceptions"] = list(browser.exceptions)
            try:
                result["pageText"] = browser.evaluate("document.body.innerText.slice(0, 2000)")
            except DriverError:
                pass
    except Exception as error:  # noqa: BLE001 - everything goes into the result the test reads
        result["errors"].append("%s: %s" % (type(error).__name__, error))
    finally:
        if browser is not None:
            browser.close()
    print(json.dumps(result, sort_keys=True))
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main())
