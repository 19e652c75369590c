// `kiln eval watch <id>` (and `project evaluate --watch`, `task evaluate --watch`): follows an
// evaluation over its live WebSocket until it is final. The socket is subscribed before the
// evaluation and its builds are read, so no change falls between the two; build.status_changed
// moves a row, an unknown build or stream.lagged reads the lists again, a final phase reads them
// once more and ends. A dropped socket is opened again. On a terminal, stderr shows a progress
// bar and the builds still moving, redrawn in place; elsewhere each change is one line on stderr.
// The result (stdout) is the evaluation with its builds; the exit status is 1 when it failed, was
// aborted or has failed builds.
import { setTimeout as wait } from 'node:timers/promises';
import type { BuildView, EvaluationView } from '../protocol/index.js';
import { isApiRequestError, type ApiClient } from './apiClient.js';
import type { Output } from './clientOutput.js';
import { inert } from './inertText.js';
import { countsLine, evaluationFailed, FINAL_PHASES, showEvaluationWithBuilds, sortBuilds, type EvaluationWithBuilds } from './evaluationText.js';
import { openLiveSocket, type LiveEvent } from './liveSocket.js';

/** Times in a row a dropped live socket is opened again before watching gives up. */
const REOPENS = 5;
const REOPEN_WAIT_MS = 1000;
/** A terminal is redrawn at most this often. */
const REDRAW_MS = 100;
const DONE_STATUSES = new Set(['completed', 'substituted', 'failed', 'aborted']);

/** What the watcher shows while it waits. */
interface WatchView {
  update(state: EvaluationWithBuilds): void;
  buildChanged(build: BuildView): void;
  phaseChanged(phase: string): void;
  activity(message: string): void;
  /** clears what was drawn */
  end(): void;
}

function counts(builds: readonly BuildView[]): EvaluationView['builds'] {
  const c = { total: builds.length, queued: 0, started: 0, completed: 0, failed: 0, substituted: 0, aborted: 0 };
  for (const b of builds) if (b.status in c && b.status !== 'total') c[b.status as keyof typeof c]++;
  return c;
}

/** Lines on stderr: one per build each time its status is seen to change (by an event or a read), and one per phase. */
function lineView(stream: NodeJS.WritableStream): WatchView {
  const printed = new Map<string, string>();
  const buildChanged = (b: BuildView) => {
    if (printed.get(b.build_id) === b.status) return;
    printed.set(b.build_id, b.status);
    stream.write(`${b.status.padEnd(11)} ${inert(b.name)}${b.failure ? ` (${b.failure.class})` : ''}\n`);
  };
  return {
    update: (state) => sortBuilds(state.builds).forEach(buildChanged),
    buildChanged,
    phaseChanged: (phase) => stream.write(`evaluation ${phase}\n`),
    activity: () => undefined,
    end: () => undefined,
  };
}

/** A block redrawn in place on a terminal: the phase, a bar of builds done, and the builds not done (running, then queued, then the rest) as far as the screen allows. */
function terminalView(stream: NodeJS.WriteStream): WatchView {
  let state: EvaluationWithBuilds | null = null;
  let lastActivity = '';
  let drawn = 0;
  let timer: NodeJS.Timeout | null = null;
  const width = () => (stream.columns || 100) - 1;
  const draw = () => {
    timer = null;
    if (!state) return;
    const { evaluation, builds } = state;
    const c = counts(builds);
    const done = builds.filter((b) => DONE_STATUSES.has(b.status)).length;
    const fraction = builds.length > 0 ? done / builds.length : 0;
    const filled = Math.round(fraction * 30);
    const order = (b: BuildView) => (b.status === 'started' ? 0 : b.status === 'failed' ? 1 : b.status === 'queued' ? 2 : 3);
    const room = Math.max(3, (stream.rows || 24) - 5);
    const rows = sortBuilds(builds).sort((a, b) => order(a) - order(b)).slice(0, room);
    const lines = [
      `evaluation ${evaluation.id}: ${evaluation.phase}${lastActivity ? ` - ${lastActivity}` : ''}`,
      `[${'#'.repeat(filled)}${'-'.repeat(30 - filled)}] ${String(done).padStart(String(builds.length).length)}/${builds.length}  ${countsLine(c).replace(/^\d+ builds: /, '')}`,
      ...rows.map((b) => `  ${b.status.padEnd(11)} ${b.name}${b.failure ? ` (${b.failure.class})` : ''}`),
      ...(builds.length > rows.length ? [`  … ${builds.length - rows.length} more`] : []),
    ].map((l) => inert(l).slice(0, width()));
    stream.write(`${drawn > 0 ? `\x1b[${drawn}F` : ''}\x1b[J${lines.join('\n')}\n`);
    drawn = lines.length;
  };
  const schedule = () => {
    timer ??= setTimeout(draw, REDRAW_MS);
  };
  return {
    update(next) {
      state = next;
      schedule();
    },
    buildChanged: schedule,
    phaseChanged: schedule,
    activity(message) {
      lastActivity = message.split('\n').filter((l) => l.trim() !== '').at(-1) ?? '';
      schedule();
    },
    end() {
      if (timer) clearTimeout(timer);
      if (drawn > 0) stream.write(`\x1b[${drawn}F\x1b[J`);
      drawn = 0;
    },
  };
}

const silentView: WatchView = { update: () => undefined, buildChanged: () => undefined, phaseChanged: () => undefined, activity: () => undefined, end: () => undefined };

export interface WatchOptions {
  /** each build as it is seen (a read or its status event): `kiln build` follows the logs of those that start */
  onBuild?: (build: BuildView) => void;
  /** one line per change even on a terminal (the build logs share the screen) */
  lines?: boolean;
  /** false: the caller reports the result and sets the exit status */
  report?: boolean;
}

export async function watchEvaluation(client: ApiClient, id: string, out: Output, stream: NodeJS.WriteStream = process.stderr, options: WatchOptions = {}): Promise<EvaluationWithBuilds> {
  const shown = out.json ? silentView : stream.isTTY && options.lines !== true ? terminalView(stream) : lineView(stream);
  const onBuild = options.onBuild ?? (() => undefined);
  const view: WatchView = {
    ...shown,
    update: (state) => (state.builds.forEach(onBuild), shown.update(state)),
    buildChanged: (build) => (onBuild(build), shown.buildChanged(build)),
  };
  let state: EvaluationWithBuilds | null = null;
  let final = false;
  let settle!: { resolve: () => void; reject: (e: unknown) => void };
  const ended = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
  ended.catch(() => undefined); // raced below; a failure between two races is seen by the next

  // One read at a time; a request during a read makes one more afterwards.
  let reading = false;
  let readAgain = false;
  const read = async () => {
    if (reading) {
      readAgain = true;
      return;
    }
    reading = true;
    try {
      do {
        readAgain = false;
        const evaluation = await client.call<EvaluationView>('GET', `/evals/${id}`);
        const builds = await client.call<BuildView[]>('GET', `/evals/${id}/builds`);
        state = { evaluation, builds };
        view.update(state);
        if (FINAL_PHASES.has(evaluation.phase)) {
          final = true;
          settle.resolve();
        }
      } while (readAgain && !final);
    } catch (e) {
      settle.reject(e);
    } finally {
      reading = false;
    }
  };

  const onEvent = (e: LiveEvent) => {
    if (final || e.event === 'stream.open') return;
    if (e.event === 'stream.lagged' || state === null) return void read();
    const content = e.content;
    if (e.event === 'build.status_changed') {
      const build = state.builds.find((b) => b.build_id === content['build_id']);
      if (!build) return void read();
      build.status = String(content['status']);
      if (typeof content['failure'] === 'string') build.failure = { class: content['failure'], reason: null, message: null };
      state.evaluation.builds = counts(state.builds);
      view.buildChanged(build);
    } else if (e.event === 'evaluation.activity') {
      view.activity(String(content['message'] ?? ''));
    } else if (e.event.startsWith('evaluation.') && typeof content['phase'] === 'string' && content['phase'] !== state.evaluation.phase) {
      state.evaluation.phase = content['phase'];
      view.phaseChanged(content['phase']);
      // A new phase may bring builds (the graph was recorded) or the end: read both again.
      void read();
    }
  };

  try {
    for (let failures = 0; !final; ) {
      const socket = await openLiveSocket(client.settings, `/evals/${encodeURIComponent(id)}/live`, onEvent);
      try {
        await Promise.race([socket.opened, ended]);
        failures = 0;
        void read();
        await Promise.race([socket.closed, ended]);
      } catch (e) {
        // A refusal (unknown evaluation, no permission) is the answer; a lost connection is tried again.
        if (isApiRequestError(e) || final || ++failures > REOPENS) throw e;
      } finally {
        socket.close();
      }
      if (!final) await Promise.race([wait(REOPEN_WAIT_MS), ended]);
    }
  } finally {
    view.end();
  }
  const result = state!;
  if (options.report === false) return result;
  out.result(result, showEvaluationWithBuilds);
  if (evaluationFailed(result.evaluation)) process.exitCode = 1;
  return result;
}
