export * from './db/index.js';
export * from './queue/index.js';
export { createCpuPool, type CpuPool, type CpuPoolOptions, type CpuPoolStats } from './cpuPool.js';
export type { CpuTaskName, CpuTaskInput, CpuTaskOutput, Sha256FileResult } from './cpuWorker.js';
export * from './blobs/index.js';
