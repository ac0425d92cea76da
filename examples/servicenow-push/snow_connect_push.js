/*
 * snow-connect push notification (docs/push.md, ADR 0032).
 *
 * Install as a Business Rule on each table a snow-connect source reads:
 *   When: async   Insert: yes   Update: yes   Delete: yes   Advanced: yes   Order: 10000
 *   Condition: optional (for example only when fields the connector cares about change)
 * An *async* rule runs after the write committed, in a scheduler worker: the row is visible to
 * the connector's next read when the notification arrives.
 *
 * System properties it reads (create them once):
 *   x_snow_connect.push.url         https://<host>:<port>/snow/push/<connector name>
 *   x_snow_connect.push.secret_b64  the shared secret, base64 (type password2): the same bytes
 *                                   as the connector's snow.push.secret
 *   x_snow_connect.push.mid_server  optional: a MID Server name, when the host is reachable only
 *                                   from inside your network
 *
 * The notification is a wake-up only: the connector reads the rows through its cursor as always,
 * so a lost or repeated notification never loses or repeats a row. What it costs the instance:
 * one scheduled job and one outbound HTTPS call per write of the table.
 */
(function executeRule(current, previous /* null in async rules */) {
    var url = gs.getProperty('x_snow_connect.push.url');
    if (!url) {
        return;
    }
    // A delete is stamped with the time of the delete (the row's own stamp is its last update):
    // the connector's sweep of sys_audit_delete may then read up to it at once.
    var stamp = current.operation() == 'delete' ? new GlideDateTime().getValue() : current.getValue('sys_updated_on');
    var body = JSON.stringify({
        table: current.getTableName(),
        sys_id: current.getUniqueValue(),
        sys_updated_on: stamp
    });
    var timestamp = String(Math.floor(new GlideDateTime().getNumericValue() / 1000));
    // HMAC-SHA256 of "<timestamp>.<body>", base64 (the key is given base64-encoded).
    var key = gs.getProperty('x_snow_connect.push.secret_b64');
    var mac = new GlideCertificateEncryption().generateMac(key, 'HmacSHA256', timestamp + '.' + body);
    var request = new sn_ws.RESTMessageV2();
    request.setEndpoint(url);
    request.setHttpMethod('post');
    request.setRequestHeader('Content-Type', 'application/json');
    request.setRequestHeader('X-Snow-Push-Timestamp', timestamp);
    request.setRequestHeader('X-Snow-Push-Signature', 'v1=' + mac);
    request.setRequestBody(body);
    request.setHttpTimeout(5000);
    var mid = gs.getProperty('x_snow_connect.push.mid_server');
    if (mid) {
        request.setMIDServer(mid);
    }
    try {
        request.executeAsync();
    } catch (e) {
        // A notification that cannot be sent is only a later read: the connector's next poll finds the row.
        gs.warn('snow-connect push for ' + current.getTableName() + ' failed: ' + e);
    }
})(current, previous);
