// Registry options under database.*, localDb.*, s3.*, redis.*.
import { bool, unsignedInt, positiveInt, port, str, path, url, pgMemory, nullable } from '../kinds.js';
import { option, noEnv } from '../option.js';

/** Where kiln keeps its data: PostgreSQL (external or the local one), S3 and Redis. */
export const storageOptions = {
  'database.cache.maxConnections': option(
    positiveInt(), 32,
    'maximum connections of the cache query pool (separate from the scheduler pool)',
  ),
  'database.cache.minConnections': option(unsignedInt(), 2, 'minimum connections of that pool'),
  'database.maxConnections': option(
    positiveInt(), 16,
    'maximum connections of the scheduler and worker pool; a server process opens up to the sum of this, database.cache.maxConnections and database.web.maxConnections, and the database\'s own connection limit must cover that sum',
  ),
  'database.minConnections': option(unsignedInt(), 2, 'minimum connections of the scheduler and worker pool'),
  'database.url': option(
    url(['postgres', 'postgresql']), 'postgres://kiln@/kiln?host=/var/run/postgresql',
    'relational database connection URL; the default is the local socket for role and database kiln',
    { mask: 'urlPassword' },
  ),
  'database.urlFile': option(
    nullable(path()), null,
    'file containing the URL; wins over database.url (spec default "derived": kiln derives nothing, null means database.url is used)',
  ),
  'database.web.maxConnections': option(positiveInt(), 8, 'maximum connections of the HTTP API pool'),
  'database.web.minConnections': option(unsignedInt(), 1, 'minimum connections of the HTTP API pool'),
  'localDb.enable': option(bool(), false, 'set up a local database', noEnv),
  'localDb.effectiveCacheSize': option(
    nullable(pgMemory()), null,
    'planner hint; set to three quarters of RAM; null keeps the database default',
    noEnv,
  ),
  'localDb.maintenanceWorkMem': option(
    nullable(pgMemory()), null,
    'memory for index builds and autovacuum, claimed by each autovacuum worker; null keeps default',
    noEnv,
  ),
  'localDb.sharedBuffers': option(
    nullable(pgMemory()), '512MB',
    'one fixed allocation; size to a quarter of RAM; null keeps default',
    noEnv,
  ),
  'localDb.workMem': option(
    nullable(pgMemory()), null,
    'per sort or hash node floor; 32MB suits hosts sized for the three server pools; null keeps default',
    noEnv,
  ),
  'localDb.port': option(
    nullable(port()), null,
    'port of the local PostgreSQL (localDb.enable); null picks a free port at each start',
    { env: false, extension: true },
  ),
  's3.enable': option(bool(), false, 'store NARs in an S3-compatible object store', noEnv),
  's3.accessKeyId': option(
    nullable(str()), null,
    'access key ID; null uses instance credentials or the environment',
    { mask: 'partial' },
  ),
  's3.bucket': option(
    str(), '',
    'bucket name; the bucket must not have versioning, object lock or replication, since overwrites happen in place and old versions would remain unreclaimable',
  ),
  's3.endpoint': option(
    nullable(url(['http', 'https'])), null,
    'endpoint of a compatible service; null uses the original provider',
  ),
  's3.maxRetries': option(unsignedInt(), 3, 'retries of a failed request'),
  's3.prefix': option(str(), '', 'key prefix inside the bucket; empty stores at the root'),
  's3.readTimeoutSecs': option(
    unsignedInt(), 60,
    'seconds a response may stall before the request fails; received chunks reset the timer',
  ),
  's3.region': option(str(), 'us-east-1', 'region'),
  's3.retryTimeoutSecs': option(
    unsignedInt(), 250,
    'seconds after the first attempt past which no retry starts; keep above (maxRetries + 1) * readTimeoutSecs and below 5 minutes because retries reuse the original credentials',
  ),
  's3.secretAccessKeyFile': option(nullable(path()), null, 'file with the secret key; null uses instance credentials'),
  's3.virtualHostedStyle': option(
    bool(), false,
    'address a custom endpoint as <bucket>.<endpoint> instead of <endpoint>/<bucket>; no effect without a custom endpoint',
  ),
  'redis.url': option(
    nullable(url(['redis', 'rediss'])), null,
    'Redis for the event bus between server processes and for rate limits; null keeps both in process (PostgreSQL LISTEN/NOTIFY carries events between processes)',
    { mask: 'urlPassword', extension: true },
  ),
};
