// S3's error responses as S3 sends them: the status, an XML <Error> body (none for HEAD), and the
// x-amz-request-id / x-amz-id-2 headers that every S3 answer carries.
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { xmlDocument, type XmlFields } from './s3Xml.js';

export class S3Error extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** extra elements S3 adds to the <Error> body for this code */
    readonly fields: XmlFields = {},
  ) {
    super(message);
    this.name = 'S3Error';
  }
}

/** The headers S3 puts on every response. */
export function s3ResponseHeaders(): Record<string, string> {
  return {
    'x-amz-request-id': randomBytes(8).toString('hex').toUpperCase(),
    'x-amz-id-2': randomBytes(48).toString('base64'),
    date: new Date().toUTCString(),
    server: 'AmazonS3',
  };
}

export function sendS3Error(response: ServerResponse, method: string | undefined, error: S3Error): void {
  const headers = s3ResponseHeaders();
  const body = method === 'HEAD'
    ? ''
    : xmlDocument('Error', {
      Code: error.code,
      Message: error.message,
      ...error.fields,
      RequestId: headers['x-amz-request-id'],
      HostId: headers['x-amz-id-2'],
    }, false);
  response.writeHead(error.status, { ...headers, 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) });
  response.end(body);
}

export const accessDenied = (message = 'Access Denied', fields: XmlFields = {}): S3Error => new S3Error(403, 'AccessDenied', message, fields);
export const malformedXml = (): S3Error =>
  new S3Error(400, 'MalformedXML', 'The XML you provided was not well-formed or did not validate against our published schema');
export const invalidArgument = (message: string, name: string, value: string): S3Error =>
  new S3Error(400, 'InvalidArgument', message, { ArgumentName: name, ArgumentValue: value });
export const noSuchUpload = (uploadId: string): S3Error =>
  new S3Error(404, 'NoSuchUpload', 'The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.', { UploadId: uploadId });
export const notImplemented = (what: string): S3Error =>
  new S3Error(501, 'NotImplemented', `A header or parameter you provided implies functionality that is not implemented: ${what}`);
