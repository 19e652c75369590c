// A resource (most often a list) loaded from the API into state, with its failure as the text to show.
// The one "try get, keep it, else show the message" block the list components share.
import { untrack } from 'svelte';
import { messageOf } from '$lib/components/format';

export class Loaded<T> {
  /** the last answer; null until the first one */
  value = $state<T | null>(null);
  /** the last load's or action's failure as the API worded it; null after a load that succeeded */
  failure = $state<string | null>(null);
  /** a load is under way */
  loading = $state(false);
  readonly #fetch: () => Promise<T>;
  /** counts loads: only the latest one's answer is kept, so a slow earlier answer (another sort, another page) never overwrites a newer one */
  #generation = 0;

  /**
   * When it loads by itself: `follow` (the default) at once and again whenever a reactive value that `fetch`
   * reads before its first await changes (a route parameter, a page number); `once` at once only (filter
   * inputs that apply on submit call reload()); `manual` only when reload() is called (e.g. when a live
   * socket opens). Construct it while a component initialises.
   */
  constructor(fetch: () => Promise<T>, { load = 'follow' }: { load?: 'follow' | 'once' | 'manual' } = {}) {
    this.#fetch = fetch;
    if (load === 'manual') return;
    $effect(() => {
      if (load === 'follow') void this.reload();
      else untrack(() => void this.reload());
    });
  }

  async reload(): Promise<void> {
    const generation = ++this.#generation;
    this.loading = true;
    try {
      const value = await this.#fetch();
      if (generation !== this.#generation) return;
      this.value = value;
      this.failure = null;
    } catch (e) {
      if (generation === this.#generation) this.failure = messageOf(e);
    } finally {
      if (generation === this.#generation) this.loading = false;
    }
  }

  /** Runs a change (delete, ping, redeliver …), then shows the resource as the server now has it, also after a refusal, whose message stays shown. */
  async change(action: () => Promise<unknown>): Promise<void> {
    this.failure = null;
    let refusal: string | null = null;
    try {
      await action();
    } catch (e) {
      refusal = messageOf(e);
    }
    await this.reload();
    if (refusal !== null) this.failure = refusal;
  }
}
