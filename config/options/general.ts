// Registry options under serviceCi.*, errorReport.*, pullRequests.*, packages.*.
import { bool, unsignedInt, port, str, path, url, ipAddress, attrs, pkg, nullable } from '../kinds.js';
import { option, derived, noEnv, deploymentOnly } from '../option.js';

/** General options of the server, and the error-report, pull-request, hosted-CI and package options. */
export const generalOptions = {
  baseDir: option(path(), '/var/lib/kiln', 'directory for state, NAR files and caches'),
  domain: option(nullable(str({ nonEmpty: true })), null, 'domain under which the service is reachable', noEnv),
  enable: option(bool(), false, 'enable the server (a deployment switch: `kiln serve` always serves)', deploymentOnly),
  environmentVariables: option(
    attrs(), {},
    'extra environment variables of the server; they win over other options; null unsets',
    { env: false, mask: 'attrValues' },
  ),
  listenAddr: option(ipAddress(), '127.0.0.1', 'listen IP address'),
  localWorker: option(
    bool(), derived('worker.enable'),
    'register the worker on this host automatically (ID from the host name, token and peers file created on first start); members of the state-declared team server reach every new project including the local worker; disable to register it like a remote worker with worker.id and worker.peersFile',
    noEnv,
  ),
  port: option(port({ listen: true }), 3000, 'listen port; 0 picks a free port'),
  publicStats: option(
    bool(), false,
    'when true, GET /api/v1/workers and worker stats need no authentication; otherwise only superusers',
  ),
  retentionDays: option(
    unsignedInt(), 90,
    'days to keep job assignment records, finished deliveries, worker connection history, webhook and task action deliveries, expired sessions, CLI logins, finished admin tasks, the audit log, per-build resource samples, finished cluster jobs; removed resource samples stop feeding build predictions; active cluster jobs and the newest finished admin task of each kind are exempt; open worker connections stay until the worker\'s next connection; 0 keeps everything',
  ),
  serveUrl: option(
    url(['http', 'https']), derived('http(s)://<domain> when domain is set, else http(s)://<listenAddr>:<port>; https when useTls'),
    'public URL of the service, for URLs other than domain',
  ),
  storePath: option(
    nullable(str()), null,
    'not described by the spec; declared so that configurations carrying it load; kiln does not read it',
  ),
  useQuic: option(bool(), false, 'advertise HTTP/3 (QUIC) to clients'),
  useTls: option(bool(), true, 'enable TLS'),
  'serviceCi.enable': option(bool(), true, 'enable the hosted CI offer shown on the workers pages'),
  'errorReport.dsn': option(
    nullable(url(['http', 'https'])), null,
    'error-reporting DSN used when enabled; null sends reports to the maintainers\' instance',
    { mask: 'urlUserinfo' },
  ),
  'errorReport.enable': option(bool(), false, 'enable error reporting'),
  'pullRequests.commitEmail': option(
    nullable(str()), null,
    'author and committer e-mail of commits made by the open_pr action; null uses the Git host\'s default',
  ),
  'pullRequests.commitName': option(
    nullable(str()), null,
    'author and committer name of those commits; null uses the Git host\'s default (the application bot, or the token owner with a generic fallback identity, which needs a read-user scope on the token)',
  ),
  'packages.frontend': option(pkg(), null, 'frontend package; null lets the deployment derive it', deploymentOnly),
  'packages.server': option(pkg(), null, 'server package; null lets the deployment derive it', deploymentOnly),
};
