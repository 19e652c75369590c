// The public face of protocol/net/: what other folders import from it (DESIGN.md, Layout).
export { ipv6Groups, mappedIpv4, nonPublicRange } from './addressRanges.js';
export { OUTBOUND_OPTION, OutboundPolicy, urlHost, type UrlHost } from './outboundPolicy.js';
