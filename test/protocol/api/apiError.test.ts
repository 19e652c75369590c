import t from 'tap';
import { ApiError, errorCodes } from '../../../protocol/index.js';

t.test('the status comes from the code\'s declaration', async (t) => {
  t.equal(new ApiError('cache_full', 'x').status, 413);
  t.equal(new ApiError('forbidden_source_ip', 'x').status, errorCodes.forbidden_source_ip.status);
});

t.test('withHeaders adds headers and keeps the code, message and the headers already there', async (t) => {
  const first = new ApiError('upload_busy', 'busy', { headers: { 'Retry-After': '1' } });
  const more = first.withHeaders({ 'X-Extra': 'y' });
  t.same([more.code, more.status, more.message], ['upload_busy', 503, 'busy']);
  t.same(more.headers, { 'Retry-After': '1', 'X-Extra': 'y' });
  t.same(first.headers, { 'Retry-After': '1' }, 'the original is unchanged');
});
