// The status and code of each upload problem (docs/errors.md). All are 4xx: the client can act on
// each one, and Nix 2.8 hangs retrying a 5xx answer to an upload PUT.
import { ApiError } from '../protocol/index.js';
import type { UploadProblem } from '../storage/index.js';

export function uploadFailure(problem: UploadProblem): ApiError {
  switch (problem.kind) {
    case 'invalid_nar':
      return new ApiError('invalid_nar', problem.message);
    case 'nar_mismatch':
      return new ApiError('nar_mismatch', problem.message);
    case 'unsupported_compression':
      return new ApiError('unsupported_compression', problem.message);
    case 'incomplete_upload':
      return withStagedBytes(new ApiError('incomplete_upload', problem.message), problem.bytesStaged);
    case 'offset_mismatch':
      return withStagedBytes(new ApiError('offset_mismatch', problem.message), problem.bytesStaged);
    case 'upload_in_progress':
      return new ApiError('upload_in_progress', problem.message);
    case 'path_exists':
      return new ApiError('path_exists', problem.message);
    case 'no_staged_upload':
      return new ApiError('no_staged_upload', problem.message);
    case 'upload_too_large':
      return new ApiError('nar_too_large', problem.message);
  }
}

// A client resuming an upload needs the count as a number, not only in the message: http sends it
// as the Upload-Offset header.
const STAGED = Symbol('kiln.bytesStaged');

function withStagedBytes(error: ApiError, bytes: number | undefined): ApiError {
  return bytes === undefined ? error : Object.assign(error, { [STAGED]: bytes });
}

/** The bytes staged that an offset_mismatch or incomplete_upload error reports. */
export function stagedBytesOf(error: unknown): number | undefined {
  const value = typeof error === 'object' && error !== null ? (error as { [STAGED]?: unknown })[STAGED] : undefined;
  return typeof value === 'number' ? value : undefined;
}
