// Registry options under frontend.*, http.*, outbound.*, ssh.*, proto.*, reverseProxy.*, tls.*.
import { bool, int, unsignedInt, positiveInt, port, str, path, url, cidrList, ipList, lines, nullable } from '../kinds.js';
import { option, derived, noEnv, deploymentOnly } from '../option.js';

/** HTTP, /proto, SSH, the frontend and the reverse proxies in front of the server. */
export const networkOptions = {
  'frontend.enable': option(bool(), true, 'enable the web frontend', noEnv),
  'frontend.logoUrl': option(nullable(str()), null, 'image shown instead of the default logo on sign-in pages'),
  'frontend.url': option(url(['http', 'https']), derived('serveUrl'), 'public frontend URL, used for links in CI status reports'),
  'http.localIps': option(
    cidrList(), ['192.168.0.0/16', '172.16.0.0/12', '100.64.0.0/10', '10.0.0.0/8', 'fc00::/7'],
    'clients in these CIDR ranges receive a cache\'s local_priority when set and non-zero',
  ),
  'http.maxRequestSize': option(
    positiveInt(), 2097152,
    'maximum request body bytes for most endpoints; build request blob uploads have a fixed 20 MiB cap',
  ),
  'http.maxSourceUploadSize': option(
    positiveInt(), 536870912,
    'maximum bytes of a source upload to POST /build-requests/source and of a chunked manifest in total; bundled reverse proxies raise their body limit to fit',
  ),
  'http.threads': option(
    int({ min: 1, max: 64 }), derived('the number of cores (os.availableParallelism()), at most 64'),
    'uWS serving threads, alone on the server\'s port (the main thread listens on loopback for what they relay): each answers anonymous narinfo requests from its own hot memory, sends anonymous readers\' NAR files itself from the filesystem store, and relays everything else to the main thread; 1 serves everything from the main thread',
    { extension: true },
  ),
  'tls.certFile': option(
    nullable(path()), null,
    'PEM certificate chain kiln serves TLS with on its port, terminated in the serving threads (at least one runs); null leaves TLS to a proxy in front; useTls keeps its meaning (https URLs, Secure cookies)',
    { extension: true },
  ),
  'tls.keyFile': option(nullable(path()), null, 'PEM private key of tls.certFile', { extension: true }),
  'http.trustedProxies': option(cidrList(), ['127.0.0.1/8', '::1/128'], 'CIDR ranges of peers allowed to set X-Forwarded-For'),
  'outbound.allowedNetworks': option(
    cidrList(), [],
    'CIDR ranges that webhooks, task actions and upstream caches may reach besides public addresses (loopback, private, link-local and other special ranges are refused otherwise)',
    { extension: true },
  ),
  'ssh.enable': option(
    bool(), false,
    'serve the package manager\'s daemon protocol over SSH for ssh-ng substituters, copy and remote builds',
  ),
  'ssh.hostKeyFile': option(
    nullable(path()), null,
    'OpenSSH private host key; null generates an ed25519 key in baseDir on first start',
  ),
  'ssh.idleTimeoutSecs': option(
    int({ min: 0, max: 604800 }), 3600,
    'seconds a logged-in SSH connection may go without a byte from the client while no operation (a build) runs before it is dropped; 0 never drops one',
    { extension: true },
  ),
  'ssh.listenAddresses': option(ipList(), ['::'], 'addresses to listen on; IPv6 addresses also accept IPv4'),
  'ssh.loginGraceSecs': option(
    int({ min: 1, max: 3600 }), 60,
    'seconds an SSH connection may take from its TCP accept to a successful login before it is dropped',
    { extension: true },
  ),
  'ssh.maxSessionsPerUser': option(
    int({ min: 1, max: 10000 }), 32,
    'SSH sessions (ssh-ng or ssh:// store connections) one user may have running at once across all connections; past it a session is refused with a message',
    { extension: true },
  ),
  'ssh.openFirewall': option(bool(), false, 'open the SSH port', deploymentOnly),
  'ssh.port': option(port({ listen: true }), 2222, 'SSH listen port'),
  'proto.anonymousCache.enable': option(
    bool(), true,
    'unauthenticated clients may use GET /cache/{cache}/proto for public caches; private caches always need an API key',
  ),
  'proto.anonymousCache.maxConnectionsPerIp': option(
    positiveInt(), 32,
    'simultaneous anonymous cache protocol connections per client IP',
  ),
  'proto.discoverable': option(bool(), true, 'accept incoming worker and federation connections on /proto'),
  'proto.federate': option(bool(), false, 'federation with other servers over /proto'),
  'proto.maxConnections': option(positiveInt(), 256, 'maximum simultaneous /proto WebSocket connections; the cache protocol (GET /cache/{cache}/proto) has as many of its own'),
  'proto.public': option(bool(), false, 'expose /proto through the reverse proxy', deploymentOnly),
  'proto.workerHeartbeatTimeoutSecs': option(
    unsignedInt(), 120,
    'seconds a worker may be silent before it counts as dead and its jobs are re-queued; workers beat every 10 s; the only detection of a worker lost without clean TCP close; 0 disables',
  ),
  'reverseProxy.proxyA.enable': option(bool(), false, 'virtual host for the first supported proxy', deploymentOnly),
  'reverseProxy.proxyA.extraConfig': option(lines(), '', 'extra lines appended after the proxy setup', deploymentOnly),
  'reverseProxy.proxyA.useCertHost': option(
    nullable(str()), null,
    'host of an existing certificate to use instead of requesting one; null leaves certificates to the proxy',
    deploymentOnly,
  ),
  'reverseProxy.proxyB.enable': option(
    bool(), derived('not reverseProxy.proxyA.enable'),
    'virtual host for the second supported proxy',
    deploymentOnly,
  ),
  'reverseProxy.proxyB.manageTls': option(
    bool(), true,
    'let that proxy obtain and present the certificate and force HTTPS; disable behind an upstream proxy that terminates TLS, and keep useTls enabled for https URLs and Secure cookies; no effect when useTls is off',
    deploymentOnly,
  ),
};
