// Failure classes of the spec's "Build failure outcomes" table, and the finer reasons a worker
// reports inside them. The class decides retries (only FailedTransient is retried); the reason
// is for people and for statistics. docs/proto.md has the table with the Nix messages behind each.
import { z } from 'zod';

export const FailureClass = z.enum(['FailedPermanent', 'FailedTransient', 'FailedTimeout']);
export type FailureClass = z.infer<typeof FailureClass>;

/** Every reason belongs to exactly one class. */
export const FAILURE_REASONS = {
  /** the builder exited with a non-zero status */
  builder_failed: 'FailedPermanent',
  /** a fixed-output derivation produced a different hash than it declares */
  hash_mismatch: 'FailedPermanent',
  /** the Nix expression does not evaluate (syntax, type, missing attribute, throw) */
  eval_error: 'FailedPermanent',
  /** the commit is not in the repository */
  commit_not_found: 'FailedPermanent',
  /** the job cannot run here: no such system, a required feature missing, a capability off */
  unsupported: 'FailedPermanent',
  /** the builder was killed by a signal other than the worker's own cancel */
  builder_crashed: 'FailedTransient',
  /** the kernel or Nix ran out of memory */
  out_of_memory: 'FailedTransient',
  /** no space left on a device */
  disk_full: 'FailedTransient',
  /** a download or connection failed */
  network: 'FailedTransient',
  /** a path could not be substituted from a cache */
  substitution_failed: 'FailedTransient',
  /** an input path (a dependency's output, a source, the .drv itself) is neither here nor substitutable */
  inputs_unavailable: 'FailedTransient',
  /** the repository could not be fetched */
  fetch_failed: 'FailedTransient',
  /** the outputs were built but could not be pushed to the server */
  push_failed: 'FailedTransient',
  /** the job was cancelled (by the server, or because the worker is stopping) */
  cancelled: 'FailedTransient',
  /** the worker's connection ended while the build ran there, on the last of build.maxAttempts (set by the server) */
  worker_lost: 'FailedTransient',
  /** anything else; retried because it is not known to be the derivation's fault */
  worker_error: 'FailedTransient',
  /** the build ran longer than its timeout */
  timeout: 'FailedTimeout',
  /** the build printed nothing for longer than its maxSilent */
  max_silent: 'FailedTimeout',
} as const satisfies Record<string, FailureClass>;

export type FailureReason = keyof typeof FAILURE_REASONS;
export const FailureReason = z.enum(Object.keys(FAILURE_REASONS) as [FailureReason, ...FailureReason[]]);

export const classOfFailure = (reason: FailureReason): FailureClass => FAILURE_REASONS[reason];

/** What a worker says about a job that did not succeed. The class must agree with the reason. */
export const JobFailure = z
  .strictObject({
    class: FailureClass,
    reason: FailureReason,
    /** Nix's own error text (ANSI colours removed), at most 16 KiB */
    message: z.string().max(16 * 1024),
    exitCode: z.int().min(0).max(255).optional(),
  })
  .refine((f) => FAILURE_REASONS[f.reason] === f.class, { message: 'the class does not match the reason', path: ['class'] })
  // the server's own reason for a lost worker: a worker cannot claim it
  .refine((f) => f.reason !== 'worker_lost', { message: 'worker_lost is set by the server, never sent by a worker', path: ['reason'] });
export type JobFailure = z.infer<typeof JobFailure>;

/** Builds a failure whose class follows from its reason; the message is cut to the schema's cap. */
export function jobFailure(reason: FailureReason, message: string, exitCode?: number): JobFailure {
  const cut = message.length > 16 * 1024 ? `${message.slice(0, 16 * 1024 - 20)}\n… (message cut)` : message;
  return { class: FAILURE_REASONS[reason], reason, message: cut, ...(exitCode === undefined ? {} : { exitCode }) };
}
