// Nix's formats, pure and I/O-free: text and bytes in, values and bytes out.
export { type Parsed, parsedOk, parseFailure } from './parsed.js';
export { NIX32_ALPHABET, nix32Length, encodeNix32, decodeNix32, isNix32 } from './nix32.js';
export {
  HASH_ALGORITHMS,
  type HashAlgorithm,
  type Hash,
  type HashFormat,
  digestBytes,
  parseHash,
  formatHash,
  toNix32Hash,
  hashEquals,
} from './hash.js';
export {
  DEFAULT_STORE_DIR,
  STORE_PATH_HASH_LENGTH,
  STORE_PATH_NAME_MAX,
  type StorePath,
  storePathNameProblem,
  parseStorePath,
  parseStorePathBaseName,
  printStorePath,
  storePathBaseName,
  isStorePathHashPart,
  storePathHashPart,
  storePathName,
} from './storePath.js';
export { type ByteSource } from './byteSource.js';
export { NarError, isNarError } from './narError.js';
export { NAR_MAGIC, encodeNarString, encodeNarStrings, encodeU64, padding as narPadding } from './narEncoding.js';
export { DEFAULT_NAR_LIMITS, type NarLimits } from './narLimits.js';
export { NarParser, type NarVisitor } from './narParser.js';
export { readNar, type NarEntry, type NarRegularEntry, type NarDirectoryEntry, type NarSymlinkEntry } from './narReader.js';
export {
  NarListingBuilder,
  renderNarListing,
  compareCodePoints,
  type NarListing,
  type NarListingNode,
  type NarListingRegular,
  type NarListingDirectory,
  type NarListingSymlink,
} from './narListing.js';
export { parseNarListing, lookupNarListing, type NarLookupResult } from './narListingLookup.js';
export { debugBuildIds } from './debugBuildIds.js';
export { writeNar, type NarTreeNode, type NarDumpOptions } from './narWriter.js';
export { type Narinfo, parseNarinfo, renderNarinfo } from './narinfo.js';
export { narinfoFingerprint, signNarinfo, verifyNarinfo, type SignedFields } from './narinfoSignature.js';
export { SigningKey, VerifyingKey } from './signingKey.js';
export { hashNar, verifyNar, sha256Nix32, type NarDigest } from './narDigest.js';
export { ingestNar, type IngestOptions, type IngestResult } from './ingestNar.js';
export {
  NAR_COMPRESSIONS,
  type NarCompression,
  isNarCompression,
  decompressNar,
  type DecompressOptions,
} from './narDecompress.js';
export { narFileExtension, narFileName, narUrl, parseNarFileName, parseNarUrl, parseNixNarFileName } from './narFile.js';
export { ZstdFrameTracker } from './zstdFrames.js';
export { parseNixExport, narFileContents, type ExportedPath } from './nixExport.js';
export { EXPORT_MAGIC, exportedNar, nextExportedPath, readExportTrailer, type ExportTrailer } from './exportWire.js';
export { parseDerivation, type Derivation, type DerivationOutput } from './derivationAterm.js';
export { textStorePath, sourceStorePath, parseContentAddress, contentAddressClaim } from './contentAddress.js';
export {
  WireReader, WireError, readImportedPathInfo, wireU64, wireString, wireStrings, wireDaemonError,
  WORKER_MAGIC_1, WORKER_MAGIC_2, STDERR_LAST,
} from './workerWire.js';
