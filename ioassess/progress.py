"""A progress bar with time left on stderr, for work that takes long enough to wait for."""
import math
import time


class Progress:
    """A progress bar with time left on stderr (a line per 10 % when stderr is not a terminal).
    Nothing is shown before quiet_for_s have passed: quick work stays silent."""

    def __init__(self, total_seconds, stream, quiet_for_s=0.0):
        self.total = total_seconds
        self.done = 0.0
        self.started = time.monotonic()
        self.stream = stream
        self.quiet_for_s = quiet_for_s
        self.last_tenth = -1
        self.shown = False

    def advance(self, seconds, label):
        self.done += seconds
        fraction = min(1.0, self.done / self.total) if self.total else 1.0
        elapsed = time.monotonic() - self.started
        if elapsed < self.quiet_for_s and not self.shown:
            return
        self.shown = True
        left = elapsed / fraction - elapsed if fraction > 0 else float("nan")
        text = f"{fraction:4.0%} {label:<40.40} {_minutes(elapsed)} elapsed, {_minutes(left)} left"
        if self.stream.isatty():
            bar = "#" * int(30 * fraction)
            self.stream.write(f"\r[{bar:<30}] {text}")
            if fraction >= 1.0:
                self.stream.write("\n")
        elif int(fraction * 10) > self.last_tenth:
            self.last_tenth = int(fraction * 10)
            self.stream.write(text.rstrip() + "\n")
        self.stream.flush()


def _minutes(seconds):
    if not math.isfinite(seconds):
        return "?"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
