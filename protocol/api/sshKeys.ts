// /user/ssh-keys (kiln extension, docs/ssh.md): POST's body, a name and an OpenSSH public key line
// (`ssh-ed25519 AAAA… comment`; whether the key parses is the service's check), the key as listed,
// and DELETE's body.
import { z } from 'zod';

export const AddSshKeyBody = z.strictObject({
  name: z.string().min(1).max(100),
  public_key: z.string().min(1).max(16_384),
});
export type AddSshKeyBody = z.infer<typeof AddSshKeyBody>;

/** One registered key as GET and POST /user/ssh-keys answer it. */
export const UserSshKeyView = z.strictObject({
  id: z.uuid(),
  name: z.string(),
  type: z.string(),
  /** `SHA256:…` as `ssh-keygen -lf` prints it */
  fingerprint: z.string(),
  /** `<type> <base64>`, what was registered without its comment */
  public_key: z.string(),
  last_used_at: z.iso.datetime({ offset: true }).nullable(),
  created_at: z.iso.datetime({ offset: true }),
});
export type UserSshKeyView = z.infer<typeof UserSshKeyView>;

/** DELETE /user/ssh-keys: the key's name, as ?name= or in the body. */
export const DeleteSshKeyBody = z.strictObject({ name: z.string().min(1).max(100) });
export type DeleteSshKeyBody = z.infer<typeof DeleteSshKeyBody>;
