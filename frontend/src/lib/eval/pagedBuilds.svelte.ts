// An evaluation's builds as the evaluation page holds them: a sparse list as long as the whole
// (filtered) list, filled a page at a time from GET /evals/{id}/builds/page as rows come into view,
// so the first rows are drawn as soon as one small page has arrived, whatever the evaluation's size.
import type { BuildView, EvaluationBuildsPage } from '$protocol/api/evaluations';
import { get, segment } from '$lib/api';
import type { LiveEvent } from '$lib/live';
import { applyBuildEvent } from './evaluationState';

/** Rows a request reads: a few screens of the table, small enough to arrive at once. */
export const BUILDS_PER_PAGE = 100;

type Counts = EvaluationBuildsPage['counts'];
type Row = BuildView | undefined;

export class PagedBuilds {
  /** one entry per build of the list; undefined where its page has not been read yet. Raw: no deep proxies */
  rows = $state.raw<readonly Row[]>([]);
  /** builds per status (the text filter applied, the status filter not) */
  counts = $state.raw<Counts | null>(null);
  /** a failure of the latest read */
  error = $state.raw<unknown>(null);
  /** build id → position in rows, for live updates */
  readonly #index = $derived(new Map(this.rows.flatMap((b, i) => (b ? [[b.build_id, i] as const] : []))));

  readonly #evaluation: string;
  /** the filter as a query string; a response to another filter is dropped */
  #query = '';
  /** the filter the rows belong to (rows of an older filter stay drawn until the new one's first answer) */
  #rowsQuery: string | null = null;
  /** bumped by refresh(): a page read before it is stale and read again when it is in view */
  #generation = 0;
  /** page → the generation it was read in */
  readonly #fresh = new Map<number, number>();
  readonly #inflight = new Set<string>();
  /** has setFilter been called (the first read started)? */
  #filtered = false;
  /** the rows in view, as the table last said */
  #range: [number, number] = [0, 0];

  constructor(evaluation: string) {
    this.#evaluation = evaluation;
  }

  /** Has the current filter's first answer arrived? */
  get ready(): boolean {
    return this.#rowsQuery === this.#query && this.counts !== null;
  }

  /** Shows the builds in `status` (null: all) whose name or attribute holds `search`, from the top. */
  setFilter(status: string | null, search: string): void {
    const params = new URLSearchParams();
    if (status) params.set('status', status);
    if (search.trim()) params.set('search', search.trim());
    const query = params.toString();
    // The same filter again (the page's first effect after the route's load started the read): nothing to do.
    if (this.#filtered && query === this.#query) return;
    this.#filtered = true;
    this.#query = query;
    this.#generation++;
    this.#fresh.clear();
    this.#range = [0, 0];
    this.view(0, 0);
  }

  /** Rows `first`…`last` are in view: reads the pages they fall on that are missing or stale. */
  view(first: number, last: number): void {
    this.#range = [first, last];
    const from = Math.floor(first / BUILDS_PER_PAGE) + 1;
    const to = Math.floor(Math.max(first, last) / BUILDS_PER_PAGE) + 1;
    for (let page = from; page <= to; page++) {
      if (this.#fresh.get(page) !== this.#generation) void this.#read(page);
    }
  }

  /** The server's builds changed: the counts and the rows in view are read again, the others when they come into view. */
  refresh(): void {
    this.#generation++;
    this.view(...this.#range);
  }

  /**
   * A build.status_changed: the row changes in place and the counts with it. Returns false when
   * the page cannot apply it alone (a build not read yet, or a status filter it may leave): then
   * the caller refreshes.
   */
  apply(event: LiveEvent): boolean {
    const before = this.rows;
    const next = applyBuildEvent(before, this.#index, event);
    if (next === null) return false;
    if (next === before) return true;
    const at = this.#index.get(String(event.content['build_id']))!;
    const [was, now] = [before[at]!.status, next[at]!.status];
    this.rows = next;
    if (this.counts && was in this.counts && now in this.counts) {
      this.counts = { ...this.counts, [was]: this.counts[was as keyof Counts] - 1, [now]: this.counts[now as keyof Counts] + 1 };
    }
    return !new URLSearchParams(this.#query).has('status');
  }

  async #read(page: number): Promise<void> {
    const [query, generation] = [this.#query, this.#generation];
    const key = `${query}|${generation}|${page}`;
    if (this.#inflight.has(key)) return;
    this.#inflight.add(key);
    try {
      const answer = await get<EvaluationBuildsPage>(
        `/evals/${segment(this.#evaluation)}/builds/page?page=${page}&per_page=${BUILDS_PER_PAGE}${query ? `&${query}` : ''}`);
      if (query !== this.#query) return;
      // An answer read before a refresh is still no older than what is drawn: use it, but read the page again.
      if (generation === this.#generation) this.#fresh.set(page, generation);
      const rows = this.#rowsQuery === query ? this.rows.slice(0, answer.total) : [];
      rows.length = answer.total;
      answer.builds.forEach((b, i) => { rows[(page - 1) * BUILDS_PER_PAGE + i] = b; });
      this.#rowsQuery = query;
      this.rows = rows;
      this.counts = answer.counts;
      this.error = null;
    } catch (e) {
      if (query === this.#query) this.error = e;
    } finally {
      this.#inflight.delete(key);
    }
  }
}
