// The part of storage/'s public face a serving thread loads (http/serving/servingThread.ts): shared
// memory only, no client of the database, S3 or Redis. index.ts brings all of storage/ along,
// about 40 MiB of heap and 70 MiB of RSS in every thread that imports it (docs/http.md, "Memory").
export { SharedReadPlaces } from './nars/sharedReadPlaces.js';
export { ThreadReadLine } from './nars/threadReadLine.js';
export { StorageBusy } from './nars/storageReadGate.js';
export { DEFAULT_READ_PACE, watchReadPace, type PaceClock, type ReadPaceLimits } from './nars/readPace.js';
export { shrinkHeapAtRest, watchHeapAtRest } from './restingHeap.js';
