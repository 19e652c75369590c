// The public face of storage/bus/: what other folders import from it (DESIGN.md, Layout).
export { createEventBus, type BusEvent, type BusListener, type BusTransport, type EventBus, type Relay, type RelayFactory } from './eventBus.js';
export { openEventBus, memoryEventBus } from './openEventBus.js';
export { redisRelay, type RedisRelayOptions } from './redisRelay.js';
export { postgresRelay, type PostgresRelayOptions } from './postgresRelay.js';
