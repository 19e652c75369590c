// The public face of storage/queue/: what other folders import from it (DESIGN.md, Layout).
export { startQueue, stopQueue, type QueueOptions } from './queue.js';
export type { PgBoss } from 'pg-boss';
