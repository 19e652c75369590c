// A form's errors: each API failure shown next to the field it names, or above the form when it names none.
import { ApiFailure } from './api';

export class FormErrors {
  /** field name → message */
  fields = $state<Record<string, string>>({});
  /** a failure that names no field of the form */
  general = $state<string | null>(null);

  constructor(private readonly known: readonly string[]) {}

  clear(): void {
    this.fields = {};
    this.general = null;
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
