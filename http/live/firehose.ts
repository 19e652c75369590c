// The firehose (spec: Firehose): every event this process sees, filtered by globs. Subscribers
// with the same globs share one filter, so an event is matched once per distinct filter. Each
// subscriber is sent the frames itself, so that a lagging one can be told apart: once its unsent
// bytes pass the lag bound it is skipped (and the skipped events counted) until its buffer has
// drained to half the bound; then it gets stream.lagged with the count and continues from the
// newest event. (uWS topics cannot tell which subscriber missed what, and leaving a topic from
// uWS's `dropped` callback is not safe.) Frames published in one turn of the event loop go out
// together, corked, so a socket costs one write per turn, not one per event.
import type { WebSocket } from 'uWebSockets.js';
import { compileEventGlobs, renderEnvelope, type EventMatcher } from '../../protocol/index.js';
import type { BusEvent } from '../../storage/index.js';

interface Group {
  matches: EventMatcher;
  members: Set<WebSocket<FirehoseSocketData>>;
  /** frames matched since the last flush */
  pending: string[];
}

export interface FirehoseMember {
  group: Group;
  lagging: boolean;
  /** events skipped since it started lagging */
  skipped: number;
}

export interface FirehoseSocketData {
  firehose?: FirehoseMember;
}

export class FirehoseHub {
  private readonly groups = new Map<string, Group>();
  private flushScheduled = false;

  /** @param lagBytes unsent bytes past which a subscriber lags; it resumes below half of them */
  constructor(private readonly lagBytes: number) {}

  /** Subscribes the socket; answers its globs' matcher. */
  join(ws: WebSocket<FirehoseSocketData>, globs: readonly string[]): EventMatcher {
    const key = [...new Set(globs)].sort().join(',');
    let group = this.groups.get(key);
    if (!group) {
      group = { matches: compileEventGlobs(globs), members: new Set(), pending: [] };
      this.groups.set(key, group);
    }
    group.members.add(ws);
    ws.getUserData().firehose = { group, lagging: false, skipped: 0 };
    return group.matches;
  }

  leave(ws: WebSocket<FirehoseSocketData>): void {
    const member = ws.getUserData().firehose;
    if (!member) return;
    member.group.members.delete(ws);
    if (member.group.members.size === 0) {
      for (const [key, g] of this.groups) if (g === member.group) this.groups.delete(key);
    }
  }

  publish(event: BusEvent): void {
    for (const group of this.groups.values()) {
      if (!group.matches(event.event)) continue;
      group.pending.push(event.frame);
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    }
  }

  private flush(): void {
    this.flushScheduled = false;
    for (const group of this.groups.values()) {
      if (group.pending.length === 0) continue;
      const frames = group.pending;
      group.pending = [];
      for (const ws of group.members) this.deliver(ws, frames);
    }
  }

  private deliver(ws: WebSocket<FirehoseSocketData>, frames: readonly string[]): void {
    const member = ws.getUserData().firehose!;
    if (member.lagging) {
      member.skipped += frames.length;
      return;
    }
    ws.cork(() => {
      for (let i = 0; i < frames.length; i++) {
        // send() answers 2 when uWS itself dropped the message (past maxBackpressure).
        if (ws.getBufferedAmount() > this.lagBytes || ws.send(frames[i]!) === 2) {
          member.lagging = true;
          member.skipped = frames.length - i;
          return;
        }
      }
    });
  }

  /** The socket's buffer drained some; a lagging subscriber resumes once it is low enough. */
  drain(ws: WebSocket<FirehoseSocketData>): void {
    const member = ws.getUserData().firehose;
    if (!member?.lagging || ws.getBufferedAmount() > this.lagBytes / 2) return;
    const skipped = member.skipped;
    member.lagging = false;
    member.skipped = 0;
    ws.send(renderEnvelope('stream.lagged', Date.now(), { skipped }));
  }

  get size(): number {
    let n = 0;
    for (const g of this.groups.values()) n += g.members.size;
    return n;
  }
}
