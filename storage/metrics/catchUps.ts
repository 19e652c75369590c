// What a reader of counts waits for first (docs/metrics.md, "Serving threads"): counts kept
// elsewhere until their next batch (a serving thread's report, sent every 100 ms) brought in, so a
// scrape or a traffic flush sees every request answered before it was asked.
export class CatchUps {
  private steps: (() => Promise<void>)[] = [];

  /** Adds a step; returns its removal. */
  add(step: () => Promise<void>): () => void {
    this.steps.push(step);
    return () => {
      this.steps = this.steps.filter((s) => s !== step);
    };
  }

  /** Runs every step at once; a step's failure costs only what it would have brought. */
  async run(): Promise<void> {
    if (this.steps.length === 0) return;
    await Promise.allSettled(this.steps.map((step) => step()));
  }
}
