// One log line into an element: plain text as text (no HTML parsing), a line with ANSI escapes
// through one shared ansi_up converter. Each line starts without colour and leaves nothing behind
// for the next: colours do not carry across lines (Nix and most build tools reset them per line),
// which keeps a line's drawing independent of every line before it.
import { AnsiUp } from 'ansi_up';

const RESET = '\x1b[0m';

function converter(): AnsiUp {
  const c = new AnsiUp();
  // The 16 standard colours become classes (drawn by LogView in shades readable on its background);
  // no URL scheme is allowed, so OSC 8 hyperlinks stay text.
  c.use_classes = true;
  c.url_allowlist = {};
  return c;
}

const shared = converter();

/** Draws `text` (one line, without its line end) as the content of `el`. */
export function drawLogLine(el: HTMLElement, text: string): void {
  if (!text.includes('\x1b')) {
    el.textContent = text;
    return;
  }
  // The reset before the line clears the state a previous line set; the one after completes a
  // CSI sequence cut off at the line's end, which ansi_up would otherwise keep for the next call.
  // An OSC sequence (ESC ]) can stay open past a reset, so such a line gets a converter of its own.
  const c = text.includes('\x1b]') ? converter() : shared;
  // ansi_up escapes the text's HTML and, with no URL scheme allowed, makes no links.
  el.innerHTML = c.ansi_to_html(RESET + text + RESET);
}
