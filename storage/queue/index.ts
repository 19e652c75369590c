export { startQueue, stopQueue, type QueueOptions } from './queue.js';
export type { PgBoss } from 'pg-boss';
