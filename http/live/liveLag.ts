// Lag on the live paths (tasks, evaluations, builds, boards), which are fed by uWS topics so that
// uWS copies each frame to the subscribers in C++. uWS's own limit (maxBackpressure) skips a slow
// subscriber silently, and its `dropped` callback does not report every skipped message, so kiln
// decides lag itself, as for the firehose (firehose.ts): when an event is published, the sockets
// of its topics are checked, and one whose unsent bytes pass the bound leaves its topics (on the
// next turn: not while uWS may be iterating them). The events of its topics are then counted
// instead of sent. Once its buffer has drained to half the bound it gets stream.lagged with that
// count and rejoins its topics, continuing with the newest events. uWS's limit is set far above
// the bound (eventSockets.ts), so it never skips anything kiln did not count.
import type { WebSocket } from 'uWebSockets.js';
import { renderEnvelope } from '../../protocol/index.js';

export interface LiveLagMember {
  topics: readonly string[];
  lagging: boolean;
  /** left its topics; events are counted, not sent */
  away: boolean;
  skipped: number;
  closed: boolean;
}

export interface LiveLagSocketData {
  live?: LiveLagMember;
}

type LiveSocket = WebSocket<LiveLagSocketData>;

export class LiveLag {
  private readonly byTopic = new Map<string, Set<LiveSocket>>();

  /** @param lagBytes unsent bytes past which a socket lags; it resumes below half of them */
  constructor(private readonly lagBytes: number) {}

  /** The socket joins its topics. */
  join(ws: LiveSocket, topics: readonly string[]): void {
    ws.getUserData().live = { topics, lagging: false, away: false, skipped: 0, closed: false };
    for (const topic of topics) {
      ws.subscribe(topic);
      let set = this.byTopic.get(topic);
      if (!set) this.byTopic.set(topic, (set = new Set()));
      set.add(ws);
    }
  }

  leave(ws: LiveSocket): void {
    const member = ws.getUserData().live;
    if (!member) return;
    member.closed = true;
    for (const topic of member.topics) {
      const set = this.byTopic.get(topic);
      set?.delete(ws);
      if (set?.size === 0) this.byTopic.delete(topic);
    }
  }

  /** An event was published to `topics`: counts it for sockets that are away, and spots new laggards. */
  observe(topics: readonly string[]): void {
    const seen = topics.length > 1 ? new Set<LiveSocket>() : null;
    for (const topic of topics) {
      const set = this.byTopic.get(topic);
      if (!set) continue;
      for (const ws of set) {
        if (seen) {
          if (seen.has(ws)) continue;
          seen.add(ws);
        }
        const member = ws.getUserData().live!;
        if (member.away) member.skipped++;
        else if (!member.lagging && ws.getBufferedAmount() > this.lagBytes) this.lag(ws, member);
      }
    }
  }

  private lag(ws: LiveSocket, member: LiveLagMember): void {
    member.lagging = true;
    setImmediate(() => {
      if (member.closed) return;
      // Unsubscribing first sends what uWS still holds for the socket: that was not skipped.
      for (const topic of member.topics) ws.unsubscribe(topic);
      member.away = true;
      this.drain(ws);
    });
  }

  /** uWS's `drain`: a socket that is away resumes once its buffer is low enough. */
  drain(ws: LiveSocket): void {
    const member = ws.getUserData().live;
    if (!member?.away || member.closed || ws.getBufferedAmount() > this.lagBytes / 2) return;
    const skipped = member.skipped;
    member.lagging = false;
    member.away = false;
    member.skipped = 0;
    ws.send(renderEnvelope('stream.lagged', Date.now(), { skipped }));
    for (const topic of member.topics) ws.subscribe(topic);
  }
}
