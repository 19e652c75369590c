export { ipv6Groups, mappedIpv4, nonPublicRange } from './addressRanges.js';
export { OUTBOUND_OPTION, OutboundPolicy, urlHost, type UrlHost } from './outboundPolicy.js';
