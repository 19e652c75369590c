export { describeIssue, type IssueDescription } from './describeIssue.js';
