// The numbers both ends of /proto agree on. The server repeats the ones it may tune in its
// `welcome` (ProtoLimits), so a worker never needs the server's configuration.

/**
 * Bumped on any change a peer of the previous version would misread.
 * 2: evalJob names its project (per-project clones on the worker; a version-1 worker shared clones between tenants).
 * 3: evalBatch goes under the server's evalCredit (a version-3 worker would wait for credit a version-2 server never sends).
 */
export const PROTOCOL_VERSION = 3;

/** Spec, "Limits": workers beat every 10 s. */
export const HEARTBEAT_INTERVAL_SECS = 10;

/** Before `welcome` nothing big may arrive: a stranger must not make either side buffer megabytes. */
export const HANDSHAKE_MAX_MESSAGE_BYTES = 1024 * 1024;

/**
 * After `welcome`: the largest NAR chunk (nar.chunkBytes ≤ 4 MiB) plus framing, with room for an
 * evaluation batch. Workers split evaluation results into batches well below this.
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024;

/** A challenge names at most this many projects (each a UUID: ~37 bytes encoded). */
export const MAX_CHALLENGE_PROJECTS = 10_000;

/** A worker offers at most this many tokens per project (its own line and a `*` line, with room for rotation). */
export const MAX_TOKENS_PER_PROJECT = 4;

/** Seconds either side waits for the other's next handshake message. */
export const HANDSHAKE_TIMEOUT_SECS = 30;

/** Evaluation results travel in batches of about this many encoded bytes. */
export const EVAL_BATCH_TARGET_BYTES = 512 * 1024;

/**
 * Batches of one evaluation a worker may send before the server's first evalCredit: the server
 * grants one more for each batch it has recorded, so what waits on the server for recording is
 * at most this many batches per evaluation, however fast the worker sends (docs/proto.md).
 */
export const EVAL_BATCH_WINDOW = 8;

/** The smallest and largest NAR chunk (nar.chunkBytes and worker.nar.chunkBytes have the same bounds). */
export const MIN_NAR_CHUNK_BYTES = 4096;
export const MAX_NAR_CHUNK_BYTES = 4 * 1024 * 1024;
