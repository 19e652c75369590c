// A form's errors: each API failure shown next to the field it names, or above the form when it names none.
import { ApiFailure } from './api';

export class FormErrors {
  /** field name → message */
  fields = $state<Record<string, string>>({});
  /** a failure that names no field of the form */
  general = $state<string | null>(null);
  /** a submit() is running: its button waits */
  busy = $state(false);

  constructor(private readonly known: readonly string[]) {}

  clear(): void {
    this.fields = {};
    this.general = null;
  }

  /** A form's submit: the errors cleared, `action` run while busy, its failure filed under its field. */
  async submit(event: SubmitEvent, action: () => Promise<void>): Promise<void> {
    event.preventDefault();
    this.busy = true;
    this.clear();
    try {
      await action();
    } catch (e) {
      this.show(e);
    } finally {
      this.busy = false;
    }
  }

  /** Files `e` under its field when the form has that field, else as the general message. */
  show(e: unknown): void {
    this.clear();
    const message = e instanceof Error ? e.message : String(e);
    const field = e instanceof ApiFailure ? e.field : null;
    if (field && this.known.includes(field)) this.fields = { [field]: message };
    else this.general = message;
  }
}
