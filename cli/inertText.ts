// Text from the server that a tenant controls (attribute names, evaluation messages from
// `builtins.trace`) drawn on a terminal: control characters become visible escapes, so nobody's
// repository can retitle the window, write the clipboard or hide lines in another user's terminal.
// Build logs are the exception (kiln build log): they are printed as they are, as `nix log` does.

// C0 controls (tab included: it would break the columns), DEL and C1 controls.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

const shown = (c: string): string => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`;

/** `text` with every control character shown as \xNN (one line: line breaks too). */
export const inert = (text: string): string => text.replace(CONTROL, shown);

/** The same, keeping line breaks (a multi-line message shown as a field). */
export const inertLines = (text: string): string => text.split('\n').map(inert).join('\n');
