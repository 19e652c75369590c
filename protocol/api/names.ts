// Names and references as paths and bodies carry them: resource names, usernames, project references.
import { z } from 'zod';

// The name rule of organizations, projects, tasks, caches and servers (0002_model.sql checks the
// same pattern): a letter or digit, then up to 62 of letters, digits, `_`, `.` and `-`. Names
// are case-insensitive (citext) but keep the case they were created with.
export const ResourceName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, 'must be 1-63 letters, digits, "_", "." or "-", starting with a letter or digit');
export type ResourceName = z.infer<typeof ResourceName>;

export const Username = ResourceName;

/** A single-segment project reference: the project's UUID, or a name one organization uses. */
export const ProjectRef = z.string().min(1).max(100);
