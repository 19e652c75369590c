// The public face of storage/: what other folders import from it (DESIGN.md, Layout).
export * from './db/index.js';
export * from './queue/index.js';
export { createCpuPool, type CpuPool, type CpuPoolOptions, type CpuPoolStats } from './cpuPool.js';
export type { CpuTaskName, CpuTaskInput, CpuTaskOutput, Sha256FileResult } from './cpuWorker.js';
export * from './blobs/index.js';
export { BufferPool, mebibyteBuffers } from './bufferPool.js';
export * from './kv/index.js';
export { openSecretBox, secretBoxWithKey, keyFromSecretText, type SecretBox } from './secretBox.js';
export { resolveInstanceKey, generatedKeyFile, keyFingerprint, rawKeyFileText, type InstanceKeySpec, type InstanceKeyName } from './instanceKeys.js';
export * from './nars/index.js';
export * from './gc/index.js';
export * from './bus/index.js';
export * from './events/index.js';
export * from './outbound/index.js';
export { secureBaseDir, SERVER_PRIVATE_DIRS } from './baseDirModes.js';
export { KilnMetrics, type Sample } from './metrics/kilnMetrics.js';
export { topWithOther } from './metrics/boundedLabel.js';
export { TrafficCounters } from './metrics/trafficCounters.js';
