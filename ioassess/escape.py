"""Strings from a job (file names, host names, executables, command lines) made safe to print
on a terminal or in a log line: every control character is written as an escape, so that a
name can neither drive the terminal (ESC sequences, OSC titles), nor split a line (CR, LF),
nor reorder what is shown (Unicode bidirectional and format controls). Everything `ioassess`
prints for a terminal or a log goes through printable (one line) or printable_lines (a text of
lines). JSON output is not escaped: it stays exact."""
import unicodedata

# Unicode categories printed escaped: C0, DEL and C1 controls (Cc), format controls such as
# U+200E/F, U+202A-202E, U+2066-2069 (Cf), line and paragraph separators (Zl, Zp), and the
# lone surrogates that stand for undecodable bytes in file names (Cs).
ESCAPED_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs"}


def printable(text):
    """text with each control character written as \\xHH (below U+0100), \\uHHHH (below U+10000)
    or \\UHHHHHHHH, so that no escape can be read as a shorter one followed by a digit."""
    if text.isprintable():
        return text
    return "".join(_escaped(char) if unicodedata.category(char) in ESCAPED_CATEGORIES else char for char in text)


def _escaped(char):
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable_lines(text):
    """text with printable() applied to each of its lines: its line breaks are kept, every
    other control character escaped."""
    return "\n".join(printable(line) for line in text.split("\n"))
