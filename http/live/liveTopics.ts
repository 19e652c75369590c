// uWS topics of the live sockets (spec: Live updates), so one publish reaches every subscriber of
// an evaluation, a task, a build or a board in C++, whatever their number:
//   eval:<id>            evaluation.<phase>, evaluation.progress, build.status_changed
//   eval:<id>:activity   evaluation.activity
//   task:<id>, task:<id>:activity   the same for every evaluation of a task
//   build:<id>           build.progress of one build
//   board                worker.queue_depth, worker.job_dispatched, worker.connected, worker.disconnected
//   caches, cache:<id>   cache.changed (every cache, one cache)
//   actors               actor.transition: a step of the supervision tree (not a bus event)
import type { BusEvent } from '../../storage/index.js';
import type { LiveFeed } from '../../services/index.js';

/** The topic of the supervision tree's transitions, which come from the tree, not the event bus. */
export const ACTORS_TOPIC = 'actors';

const BOARD_EVENTS = new Set(['worker.queue_depth', 'worker.job_dispatched', 'worker.connected', 'worker.disconnected']);

/** The topics a socket subscribes to for its feed (the firehose has its own). */
export function feedTopics(feed: LiveFeed): string[] {
  switch (feed.kind) {
    case 'task':
      return [`task:${feed.taskId}`, `task:${feed.taskId}:activity`];
    case 'evaluation':
      return [`eval:${feed.evaluationId}`, `eval:${feed.evaluationId}:activity`];
    case 'build':
      return [`eval:${feed.evaluationId}`, `build:${feed.buildId}`];
    case 'board':
      return ['board'];
    case 'boardCache':
      return feed.cacheIds === 'all' ? ['caches'] : feed.cacheIds.map((id) => `cache:${id}`);
    case 'actors':
      return [ACTORS_TOPIC];
    case 'firehose':
      return [];
  }
}

/** The topics an event is published to. */
export function eventTopics(e: BusEvent): string[] {
  const { scope } = e;
  const topics: string[] = [];
  if (e.event === 'evaluation.activity') {
    if (scope.evaluationId) topics.push(`eval:${scope.evaluationId}:activity`);
    if (scope.taskId) topics.push(`task:${scope.taskId}:activity`);
  } else if (e.event.startsWith('evaluation.') || e.event === 'build.status_changed') {
    if (scope.evaluationId) topics.push(`eval:${scope.evaluationId}`);
    if (scope.taskId) topics.push(`task:${scope.taskId}`);
  } else if (e.event === 'build.progress') {
    if (scope.buildId) topics.push(`build:${scope.buildId}`);
  } else if (BOARD_EVENTS.has(e.event)) {
    topics.push('board');
  } else if (e.event === 'cache.changed') {
    topics.push('caches');
    if (scope.cacheId) topics.push(`cache:${scope.cacheId}`);
  }
  return topics;
}
