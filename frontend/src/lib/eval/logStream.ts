// A build's log as it grows: POST /builds/{id}/log streams the stored log and then the live tail
// until the build is final. Lines are handed over in batches (one per animation frame), and the
// reader yields to the browser every few milliseconds, so a 50 MB log never blocks the page.
import { API, ApiFailure } from '$lib/api';
import { sessionToken } from '$lib/session';

/**
 * Called at most once per animation frame: `lines` are the whole lines since the last call, newest
 * last, without their line ends; `partial` the text after the last newline so far ('' when none);
 * `bytes` the characters read since the last call.
 */
export type LogSink = (lines: string[], partial: string, bytes: number) => void;

/** Time slice after which the reader lets the browser paint and handle input. */
const SLICE_MS = 8;

const nextTask = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

/** Resolves when the log ends (the build is final) or `signal` aborts; rejects with ApiFailure on a refusal. */
export async function streamLog(buildId: string, sink: LogSink, signal: AbortSignal): Promise<void> {
  const headers: Record<string, string> = {};
  const token = sessionToken();
  if (token) headers['Authorization'] = `Bearer ${token}`;
  const response = await fetch(`${API}/builds/${encodeURIComponent(buildId)}/log`, { method: 'POST', headers, signal });
  if (!response.ok || !response.body) {
    let message = `kiln answered ${response.status}`;
    let code = 'error';
    try {
      const body: unknown = await response.json();
      if (typeof body === 'object' && body !== null && 'message' in body && typeof body.message === 'string') message = body.message;
      if (typeof body === 'object' && body !== null && 'code' in body && typeof body.code === 'string') code = body.code;
    } catch {
      // Not the JSON envelope: the status says enough.
    }
    throw new ApiFailure(response.status, code, message, null);
  }

  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let carry = '';
  let batch: string[] = [];
  let bytes = 0;
  let frame = 0;
  let flushed = '';
  const flush = (): void => {
    frame = 0;
    if (batch.length === 0 && carry === flushed && bytes === 0) return;
    sink(batch, carry, bytes);
    flushed = carry;
    batch = [];
    bytes = 0;
  };
  let sliceStart = performance.now();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.length;
      const parts = (carry + value).split('\n');
      carry = parts.pop() ?? '';
      for (const part of parts) batch.push(part.endsWith('\r') ? part.slice(0, -1) : part);
      if (!frame) frame = requestAnimationFrame(flush);
      if (performance.now() - sliceStart > SLICE_MS) {
        await nextTask();
        sliceStart = performance.now();
      }
    }
  } finally {
    if (frame) cancelAnimationFrame(frame);
    flush();
    reader.releaseLock();
  }
}
