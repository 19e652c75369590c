// Registry options under cache.*, eval.*, gc.*, nar.*, upload.*.
import { bool, int, unsignedInt, positiveInt } from '../kinds.js';
import { option } from '../option.js';

/** The binary cache: NAR transfer, upload admission, the evaluation cache and garbage collection. */
export const cacheOptions = {
  'cache.debugIndexIntervalSecs': option(
    positiveInt(), 300,
    'seconds between backfill passes of the debug build-ID index; uploads are indexed immediately',
  ),
  'cache.keyOverlapHours': option(
    unsignedInt(), 168,
    'hours a cache\'s previous signing key stays listed after POST /caches/{cache}/key/rotate, its signatures served beside the new key\'s so clients trusting either keep working; 0 drops it at once',
    { extension: true },
  ),
  'cache.keyRotationMinIntervalSecs': option(
    unsignedInt(), 3600,
    'seconds after a cache\'s last signing key rotation before POST /caches/{cache}/key/rotate may rotate again (409 key_rotation_too_soon naming when); each rotation ends the older key\'s overlap and re-signs the whole cache; 0 allows it at once; the owner or a superuser may override it with force (a leaked key)',
    { extension: true },
  ),
  'cache.maxStorageGb': option(
    unsignedInt(), 0,
    'instance-wide limit on cached NAR storage in GB; new evaluations wait while every writable cache of a project has under 10 MiB left; 0 disables; per-cache limits still apply',
  ),
  'cache.signSweepIntervalSecs': option(
    positiveInt(), 3600,
    'seconds between NAR signature backfill passes; uploads are signed immediately',
  ),
  'cache.serveArchiveConcurrency': option(
    positiveInt(), 4,
    'maximum directory archives (serve/{hash}/{dir} as tar.zst) packed at once per server process; beyond it 503 with Retry-After',
    { extension: true },
  ),
  'cache.upstreamQueryConcurrency': option(
    positiveInt(), 32,
    'maximum simultaneous narinfo requests to upstream caches, server-wide',
  ),
  'eval.cache.maxAgeDays': option(
    unsignedInt(), 30,
    'days after which shared evaluation-cache blobs leave the cache regardless of size',
  ),
  'eval.cache.maxTotalBytes': option(
    unsignedInt(), 10737418240,
    'total size of shared blobs over all organizations; until within it, the least recently used blobs of the organizations holding the most are evicted first (fair shares)',
  ),
  'eval.cache.sweepIntervalSecs': option(positiveInt(), 3600, 'seconds between eviction passes'),
  'eval.maxKeep': option(
    unsignedInt(), 30,
    'maximum evaluations kept per task; caps the per-task setting; new tasks start at the lower of 30 and this value; 0 disables the limit',
  ),
  'gc.deepIntervalSecs': option(
    unsignedInt(), 3600,
    'seconds from the end of one background deep collection round to the start of the next; 0 runs rounds only on request',
  ),
  'gc.deepPaceMs': option(
    unsignedInt(), 1000,
    'milliseconds between units of a storage migration or background deep round; requested rounds run without pause',
  ),
  'gc.intervalSecs': option(positiveInt(), 3600, 'seconds between collection passes'),
  'gc.narTtlHours': option(
    unsignedInt(), 336,
    'hours a cached path outside the live closure of retained evaluations is kept after last fetch (or upload if never fetched), on top of gc.narUploadGraceHours; 0 keeps nothing beyond the grace',
  ),
  'gc.narUploadGraceHours': option(
    unsignedInt(), 24,
    'hours before an unreferenced NAR object may be deleted, covering the gap between upload and database commit',
  ),
  'gc.orphanDerivationHours': option(
    unsignedInt(), 24,
    'hours before deleting a derivation outside the build closure of every retained evaluation; 0 deletes on the next run',
  ),
  'gc.wedgedEvalHours': option(
    unsignedInt(), 24,
    'hours an evaluation may stay in one phase before it counts as stuck and stops blocking evaluation collection; 0 treats none as stuck',
  ),
  'nar.chunkBytes': option(int({ min: 4096, max: 4194304 }), 524288, 'size of each outbound NarPush chunk in bytes'),
  'nar.hotCacheBytes': option(unsignedInt(), 536870912, 'capacity of the in-memory NAR cache; 0 disables'),
  'nar.maxConcurrentDownloads': option(positiveInt(), 16, 'NAR downloads from storage running at once across all connections'),
  'nar.maxConcurrentServes': option(positiveInt(), 8, 'NAR serving tasks running at once per worker connection'),
  'nar.maxUploadSize': option(positiveInt(), 536870912, 'maximum bytes of a NAR sent to the cache upload endpoint'),
  'nar.partialTtlSecs': option(
    unsignedInt(), 86400,
    'maximum age since last write of an unfinished staged upload; older ones vanish in the next deep collection; 0 keeps all',
  ),
  'nar.sendChunkTimeoutSecs': option(
    positiveInt(), 30,
    'seconds an outbound NarPush chunk may wait for the WebSocket to drain before the transfer is aborted with NarAbort',
  ),
  'nar.smallBytes': option(
    unsignedInt(), 1048576,
    'NARs up to this size are downloaded from the server itself rather than by a presigned object-store URL, and stay in the in-memory cache; uploads do not depend on it',
  ),
  'nar.storageOpenTimeoutSecs': option(
    positiveInt(), 60,
    'seconds to wait for a NAR object stream from storage before answering the worker with NarAbort (workers retry)',
  ),
  'nar.verifyDigest': option(
    bool(), false,
    'download and hash-verify NARs committed through presigned uploads; size checks always run; passthrough and REST uploads are always verified',
  ),
  'upload.bytesBudget': option(
    positiveInt(), 8589934592,
    'total bytes of admitted uploads; others wait; an upload larger than the whole budget runs alone once nothing else is in flight',
  ),
  'upload.concurrency': option(
    positiveInt(), 8,
    'uploads over 1 MiB (NARs and evaluation cache blobs) admitted at once across workers and REST clients; smaller uploads have their own window of 128; permits are held until the object is in storage',
  ),
  'upload.leaseIdleSecs': option(
    positiveInt(), 300,
    'seconds a granted worker upload may go without data before it loses its permit and the worker is asked to retry',
  ),
  'upload.restWaitSecs': option(positiveInt(), 30, 'seconds a REST NAR upload waits for a permit before 503 with Retry-After'),
  'upload.minBytesPerSec': option(
    unsignedInt(), 65536,
    'minimum rate of an upload body, averaged over 30 s of waiting for the client; a slower body is cut with 408 upload_too_slow and gives its upload permit back; 0 disables this check (uWebSockets still closes, without an answer, a body that brings under about 16 KiB/s (its 10 s idle timeout), whatever this is)',
    { extension: true },
  ),
};
