// The code of each upload problem (docs/errors.md). All are 4xx: the client can act on
// each one, and Nix 2.8 hangs retrying a 5xx answer to an upload PUT.
import { ApiError, type ApiErrorOptions } from '../../protocol/index.js';
import type { UploadProblem } from '../../storage/index.js';

export function uploadFailure(problem: UploadProblem): ApiError {
  switch (problem.kind) {
    case 'invalid_nar':
      return new ApiError('invalid_nar', problem.message);
    case 'nar_mismatch':
      return new ApiError('nar_mismatch', problem.message);
    case 'unsupported_compression':
      return new ApiError('unsupported_compression', problem.message);
    case 'incomplete_upload':
      return new ApiError('incomplete_upload', problem.message, stagedAt(problem.bytesStaged));
    case 'offset_mismatch':
      return new ApiError('offset_mismatch', problem.message, stagedAt(problem.bytesStaged));
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

// A client resuming an upload needs the count as a number, not only in the message.
const stagedAt = (bytes: number | undefined): ApiErrorOptions =>
  bytes === undefined ? {} : { headers: { 'Upload-Offset': String(bytes) } };
