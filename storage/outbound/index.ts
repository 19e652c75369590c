// The public face of storage/outbound/: what other folders import from it (DESIGN.md, Layout).
export { createOutboundClient, OutboundRefusedError, type OutboundClient, type OutboundClientOptions } from './outboundClient.js';
export { outboundFetch, type OutboundFetch, type OutboundFetchInit } from './outboundFetch.js';
