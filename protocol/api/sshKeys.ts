// Request body of POST /user/ssh-keys (kiln extension, docs/ssh.md): a name and an OpenSSH
// public key line (`ssh-ed25519 AAAA… comment`). Whether the key parses is the service's check.
import { z } from 'zod';

export const AddSshKeyBody = z.strictObject({
  name: z.string().min(1).max(100),
  public_key: z.string().min(1).max(16_384),
});
export type AddSshKeyBody = z.infer<typeof AddSshKeyBody>;

/** DELETE /user/ssh-keys: the key's name, as ?name= or in the body. */
export const DeleteSshKeyBody = z.strictObject({ name: z.string().min(1).max(100) });
export type DeleteSshKeyBody = z.infer<typeof DeleteSshKeyBody>;
