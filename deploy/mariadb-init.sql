-- Run once by the mariadb image at a server's first start (compose): the
-- user pinstore's servers connect as. Every privilege but SUPER and
-- READ_ONLY ADMIN, so read_only stops its writes: a fenced former master
-- refuses them. Not binary-logged: every server is provisioned alike.
SET SESSION sql_log_bin = 0;
CREATE USER IF NOT EXISTS pinstore@'%' IDENTIFIED BY 'pinstore';
GRANT ALL PRIVILEGES ON *.* TO pinstore@'%';
REVOKE SUPER, READ_ONLY ADMIN ON *.* FROM pinstore@'%';
