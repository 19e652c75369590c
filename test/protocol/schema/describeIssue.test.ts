import t from 'tap';
import { z } from 'zod';
import { describeIssue } from '../../../protocol/index.js';

const failure = (schema: z.ZodType, value: unknown): z.ZodError => {
  const parsed = schema.safeParse(value);
  if (parsed.success) throw new Error('expected a failure');
  return parsed.error;
};

t.test('a nested field is named by its dotted path', async (t) => {
  const error = failure(z.object({ a: z.object({ b: z.number() }) }), { a: { b: 'x' } });
  t.same(describeIssue(error, 'body'), { path: 'a.b', field: 'a.b', reason: error.issues[0]!.message });
});

t.test('unknown keys of a strict object are named', async (t) => {
  const { path, field } = describeIssue(failure(z.strictObject({ a: z.string() }), { a: 'x', extra: 1 }), 'query');
  t.same([path, field], ['', 'extra'], 'the path stays the object\'s (the top)');
});

t.test('a problem with the value itself falls back to the name given', async (t) => {
  t.equal(describeIssue(failure(z.string(), 3), 'token').field, 'token');
});
