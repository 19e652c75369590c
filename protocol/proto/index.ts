// The /proto worker protocol: messages, codec, handshake machines, peer tokens, wildcards (docs/proto.md).
export {
  PROTOCOL_VERSION, HEARTBEAT_INTERVAL_SECS, HANDSHAKE_MAX_MESSAGE_BYTES, DEFAULT_MAX_MESSAGE_BYTES, MAX_CHALLENGE_PROJECTS,
  MAX_TOKENS_PER_PROJECT, HANDSHAKE_TIMEOUT_SECS, EVAL_BATCH_TARGET_BYTES, EVAL_BATCH_WINDOW, MIN_NAR_CHUNK_BYTES, MAX_NAR_CHUNK_BYTES,
} from './limits.js';
export { REJECT_CODES, type RejectCode, rejectCodeNames, isRejectCode, closeFrameFor, rejectCodeOfClose } from './rejectCodes.js';
export { FailureClass, FailureReason, FAILURE_REASONS, classOfFailure, JobFailure, jobFailure } from './failureClass.js';
export { StorePathText, DrvPathText, NarHashText, JobId, CommitHash, SystemType, SystemFeature } from './fields.js';
export {
  WorkerCapabilities, Hello, Challenge, ProjectToken, Auth, ProtoLimits, Welcome, Reject, LoadMetrics, Heartbeat, HeartbeatAck, ProtoError,
} from './handshakeMessages.js';
export {
  EvalJob, type RepositoryAccess, Substituter, BuildJob, type ClusterRoster, PushJob, CancelJob, JobAccepted, JobRefusal, JobRefused, DerivationNode, EvaluatedAttribute, AttributeError,
  EvalBatch, EvalResult, EvalStats, EvalHotspots, FlakeGraph, FLAKE_GRAPH_MAX_NODES, FLAKE_GRAPH_MAX_EDGES, BuildResources, BuildReading, BuildLog, PathInfo, BuiltOutput, BuildResult, PushResult, JobFailed,
  ChangeJob,
} from './jobMessages.js';
export { gitAccessEnv, withGitConfig } from './gitAccess.js';
export { NarPushStart, NarCredit, NarChunk, NarPushEnd, NarPushAck, NarAbortCode, NarAbort } from './narMessages.js';
export {
  Message, type MessageType, type MessageOf, type Outgoing, MESSAGE_TYPES, WORKER_MESSAGES, SERVER_MESSAGES, isWorkerMessage, isServerMessage,
} from './messages.js';
export { encodeMessage, decodeMessage, type DecodedMessage, type DecodeOptions } from './codec.js';
export { type PeerTokens, parsePeersFile, tokensForChallenge } from './peerTokens.js';
export {
  type HandshakeStep, type WorkerHandshakeState, type WorkerHello, startWorkerHandshake, workerHandshakeReceive, workerHandshakeTimeout,
} from './workerHandshake.js';
export {
  type ServerHandshakeState, type ServerHandshakeEvent, type ServerHandshakeStep, startServerHandshake, serverHandshake,
} from './serverHandshake.js';
export {
  type AttributeWildcard, type WildcardSegment, MAX_WILDCARD_PATTERNS, MAX_WILDCARD_DEPTH, parseAttributeWildcard, segmentMatches, isExcluded,
  wildcardSelects, formatAttributePath,
} from './attributeWildcard.js';
export { clusterSize, askedZone, isPlacementFeature } from './clusterFeatures.js';
