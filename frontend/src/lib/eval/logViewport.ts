// The lines of a long log that are in view, drawn into the log's scrolling content. Every line has
// one height, so the lines in view follow from the scroll offset alone; row elements are reused,
// and a row is redrawn only when the line it shows changed. A batch of new lines therefore costs
// what the view holds, whether the log has a hundred lines or a million.
import { drawLogLine } from './logLineHtml';

/** Height of a line in px (LogView's CSS draws lines at this height). */
export const LINE_PX = 18;

interface Row {
  el: HTMLDivElement;
  body: HTMLSpanElement;
  number: HTMLSpanElement;
  /** the text drawn, to skip redrawing an unchanged line */
  text: string | null;
}

export class LogViewport {
  readonly #content: HTMLElement;
  readonly #lineAt: (i: number) => string;
  readonly #rows = new Map<number, Row>();
  readonly #spare: Row[] = [];

  /** `content` is the scrolling element's only child; `lineAt(i)` the text of line i (0-based). */
  constructor(content: HTMLElement, lineAt: (i: number) => string) {
    this.#content = content;
    this.#lineAt = lineAt;
  }

  /** Draws lines [first, end) of `count` and removes every other row; `margin` lines beyond each edge of the view. */
  draw(count: number, scrollTop: number, viewHeight: number, margin: number): void {
    this.#content.style.height = `${count * LINE_PX}px`;
    const first = Math.max(0, Math.floor(scrollTop / LINE_PX) - margin);
    const end = Math.min(count, Math.ceil((scrollTop + viewHeight) / LINE_PX) + margin);
    for (const [i, row] of this.#rows) {
      if (i >= first && i < end) continue;
      this.#rows.delete(i);
      // Out of the DOM, not hidden: a hidden row would still be found by its text.
      row.el.remove();
      this.#spare.push(row);
    }
    for (let i = first; i < end; i++) {
      let row = this.#rows.get(i);
      if (!row) {
        row = this.#spare.pop() ?? this.#newRow();
        row.text = null;
        row.el.style.transform = `translateY(${i * LINE_PX}px)`;
        row.number.textContent = String(i + 1);
        this.#rows.set(i, row);
        this.#content.append(row.el);
      }
      const text = this.#lineAt(i);
      if (row.text !== text) {
        drawLogLine(row.body, text);
        row.text = text;
      }
    }
  }

  /** Forgets every row (a new log). */
  clear(): void {
    for (const row of this.#rows.values()) row.el.remove();
    this.#rows.clear();
  }

  #newRow(): Row {
    const el = document.createElement('div');
    el.className = 'line';
    const number = document.createElement('span');
    number.className = 'n';
    const body = document.createElement('span');
    el.append(number, body);
    return { el, body, number, text: null };
  }
}
