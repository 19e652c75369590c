export * from './api/index.js';
export * from './nix/index.js';
