// Tenant-controlled text (attribute names, evaluation messages) reaches a terminal only inert.
import t from 'tap';
import { formatFields, formatTable } from '../../cli/clientOutput.js';
import { inert, inertLines } from '../../cli/inertText.js';

// An OSC 52 clipboard write, a window title and a line that hides the one before it.
const hostile = 'pkgs.\x1b]52;c;cm0gLXJmIH4=\x07hello\x1b]0;owned\x07\r\x1b[2Kok\u009b31m';

t.test('control characters are shown, never sent', async (t) => {
  t.equal(inert('plain name-1.0'), 'plain name-1.0', 'ordinary text is untouched');
  t.equal(inert('a\tb\nc\x7f'), 'a\\x09b\\x0ac\\x7f');
  t.notMatch(inert(hostile), /[\u0000-\u001f\u007f-\u009f]/, 'no control character survives');
  t.equal(inertLines('line one\nline\x1b two'), 'line one\nline\\x1b two', 'a field keeps its line breaks');
});

t.test('tables and fields, what every client command prints on a terminal, are inert', async (t) => {
  t.notMatch(formatTable(['NAME'], [[hostile]]), /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
  t.notMatch(formatFields([['Error', hostile]]), /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
  t.equal(formatFields([['Error', 'first\nsecond']]), 'Error: first\nsecond');
});
