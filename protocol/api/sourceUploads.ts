// POST /build-requests/source's answer: the stored upload, fetched by a worker from `url` (kiln build).
import { z } from 'zod';

export const SourceUploadView = z.strictObject({
  id: z.uuid(),
  /** `org/project` */
  project: z.string(),
  size: z.number().int(),
  /** lowercase hex of the upload's SHA-256 */
  sha256: z.string(),
  format: z.string(),
  /** GET it without credentials until expires_at */
  url: z.string(),
  expires_at: z.iso.datetime({ offset: true }),
});
export type SourceUploadView = z.infer<typeof SourceUploadView>;
