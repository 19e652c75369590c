// The public face of protocol/: what other folders import from it (DESIGN.md, Layout).
export * from './api/index.js';
export * from './nix/index.js';
export * from './proto/index.js';
export * from './events/index.js';
export * from './net/index.js';
export * from './schema/index.js';
export * from './trace/index.js';
export * from './cacheProto/index.js';
