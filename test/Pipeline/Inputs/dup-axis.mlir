par.mesh @m ["x"=2, "x"=4]
