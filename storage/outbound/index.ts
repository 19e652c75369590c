export { createOutboundClient, OutboundRefusedError, type OutboundClient, type OutboundClientOptions } from './outboundClient.js';
export { outboundFetch, type OutboundFetch, type OutboundFetchInit } from './outboundFetch.js';
