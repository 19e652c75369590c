// An upload the client got wrong, as the storage layer sees it; services turn each kind into an
// ApiError with its status (4xx: Nix 2.8 hangs retrying a 5xx answer to an upload PUT). Faults of
// the server itself (disk, database, object store) are plain Errors and never an UploadProblem.

export type UploadProblemKind =
  /** the bytes are not a well-formed NAR, or not valid data of their compression */
  | 'invalid_nar'
  /** the NAR is well formed but its NarHash, NarSize or references differ from the narinfo */
  | 'nar_mismatch'
  /** a compression kiln cannot read */
  | 'unsupported_compression'
  /** finalize came before every byte of the NAR was staged */
  | 'incomplete_upload'
  /** a chunk's offset is not the number of bytes staged */
  | 'offset_mismatch'
  /** another request is writing or finalizing the same upload right now */
  | 'upload_in_progress'
  /** the cache holds another NAR of the same store path */
  | 'path_exists'
  /** nothing is staged under this key */
  | 'no_staged_upload'
  /** the NAR would exceed nar.maxUploadSize */
  | 'upload_too_large';

export class UploadProblem extends Error {
  constructor(
    readonly kind: UploadProblemKind,
    message: string,
    /** bytes staged so far, for offset_mismatch and incomplete_upload (clients resume from here) */
    readonly bytesStaged?: number,
  ) {
    super(message);
    this.name = 'UploadProblem';
  }
}

export const isUploadProblem = (e: unknown): e is UploadProblem => e instanceof UploadProblem;
